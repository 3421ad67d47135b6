package rulestore

import (
	"context"
	"encoding/json"
	"errors"
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
func (s *redisSource) declaredElsewhere(k Kind, id string, f Fields) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	raw, err := s.client.LIndex(ctx, s.names.HistoryKey(k, id), 0).Result()
	if err != nil {
		return false
	}
	var e history.Entry
	return json.Unmarshal([]byte(raw), &e) == nil && e.Declared && e.Version == Version(f)
}

// verdictUnused is the verdict of an instance that does not declare a rule
// whose stored fields it cannot complete.
const verdictUnused = "unused"

// incompleteHere reports whether err only says that a field the stored
// fields f do not set is missing or wrong: f is an overlay of a rule
// declared elsewhere, not a bad value.
func incompleteHere(f Fields, err error) bool {
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		return false
	}
	_, set := f[fe.Field]
	return !set
}

// unusedHere records that this instance does not declare rule id and
// cannot complete its stored fields f: verdict unused, not rejected.
func (s *redisSource) unusedHere(k Kind, id string, f Fields, err error) {
	fb := &s.feedback
	fb.mu.Lock()
	ref := RuleRef{k, id}
	delete(fb.invalid, ref)
	if fb.unused == nil {
		fb.unused = map[RuleRef]bool{}
	}
	first := !fb.unused[ref]
	fb.unused[ref] = true
	fb.add(ref, Verdict{State: verdictUnused, Version: Version(f), Error: "not declared on this instance, and incomplete on its own: " +
		clipN(err.Error(), 400), At: time.Now().UTC().Format(time.RFC3339Nano)})
	fb.mu.Unlock()
	if first {
		s.logger.Info("rule in redis not used here: this config does not declare it, and the stored fields are incomplete on their own",
			zap.String("key", s.names.RuleKey(k, id)), zap.String("error", clipN(err.Error(), 512)))
	}
}

// unusedGone clears an unused rule whose hash is gone; it reports whether
// the rule was unused here (its verdict is then unused, on no version).
func (fb *feedback) unusedGone(k Kind, id string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := RuleRef{k, id}
	if !fb.unused[ref] {
		return false
	}
	delete(fb.unused, ref)
	fb.add(ref, Verdict{State: verdictUnused, Error: "not declared on this instance; nothing stored",
		At: time.Now().UTC().Format(time.RFC3339Nano)})
	return true
}

// isUnused reports whether rule id is unused here.
func (fb *feedback) isUnused(k Kind, id string) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.unused[RuleRef{k, id}]
}
