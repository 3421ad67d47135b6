package redissource

import (
	"context"
	"encoding/json"
	"github.com/sluicegw/sluice/rulestore"
	"time"

	"github.com/sluicegw/sluice/rulestore/history"
	"go.uber.org/zap"
)

// A rule declared on some instances only (a rolling deploy that adds it to
// the Caddyfile, or configs that differ by role): an overlay written for
// it in Redis is incomplete on an instance that does not declare it. When
// another instance declares the rule (a live one, from its declarations
// in Redis: declares.go; or the writer, from the history entry written
// with it), an instance that neither declares nor uses the rule is not at
// fault and serves nothing under the id, so it answers "unused" (not used
// here) instead of rejecting: no invalid entry, no alert, no red status
// page. An overlay that sets a bad value, an incomplete rule nobody
// declares, or any rule an instance already serves from Redis, is still
// rejected.

// declaredElsewhere reports whether the newest history entry of the rule
// records version f written by an instance that declares the rule (an
// admin API or CLI write, recorded in the same transaction as the hash, so
// it is there when the publish arrives). A raw write says nothing of the
// kind: an incomplete one is rejected, as any rule held only in Redis.
func (s *redisSource) declaredElsewhere(k rulestore.Kind, id string, f rulestore.Fields) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	raw, err := s.client.LIndex(ctx, s.names.HistoryKey(k, id), 0).Result()
	if err != nil {
		return false
	}
	var e history.Entry
	return json.Unmarshal([]byte(raw), &e) == nil && e.Declared && e.Version == rulestore.Version(f)
}

// verdictUnused is the verdict of an instance that does not declare a rule
// whose stored fields it cannot complete.
const verdictUnused = "unused"

// unusedHere records that this instance does not declare rule id and
// cannot complete its stored fields f: verdict unused, not rejected.
func (s *redisSource) unusedHere(k rulestore.Kind, id string, f rulestore.Fields, err error) {
	fb := &s.feedback
	fb.mu.Lock()
	ref := rulestore.RuleRef{Kind: k, ID: id}
	delete(fb.invalid, ref)
	if fb.unused == nil {
		fb.unused = map[rulestore.RuleRef]bool{}
	}
	first := !fb.unused[ref]
	fb.unused[ref] = true
	fb.add(ref, rulestore.Verdict{State: verdictUnused, Version: rulestore.Version(f), Error: "not declared on this instance, and incomplete on its own: " +
		rulestore.Clip(err.Error(), 400), At: time.Now().UTC().Format(time.RFC3339Nano)})
	fb.mu.Unlock()
	if first {
		s.logger.Info("rule in redis not used here: this config does not declare it, and the stored fields are incomplete on their own",
			zap.String("key", s.names.RuleKey(k, id)), zap.String("error", rulestore.Clip(err.Error(), 512)))
	}
}

// unusedGone clears an unused rule whose hash is gone; it reports whether
// the rule was unused here (its verdict is then unused, on no version).
func (fb *feedback) unusedGone(k rulestore.Kind, id string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := rulestore.RuleRef{Kind: k, ID: id}
	if !fb.unused[ref] {
		return false
	}
	delete(fb.unused, ref)
	fb.add(ref, rulestore.Verdict{State: verdictUnused, Error: "not declared on this instance; nothing stored",
		At: time.Now().UTC().Format(time.RFC3339Nano)})
	return true
}

// isUnused reports whether rule id is unused here.
func (fb *feedback) isUnused(k rulestore.Kind, id string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.unused[rulestore.RuleRef{Kind: k, ID: id}]
}
