package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The change log: a capped stream (keyNames.Stream) with one entry per rule
// written through Sluice. Writers (write.go, patch.go) append with
// changeLogAdd in the same step as the rule; every instance reads it
// (pollStream) to catch a change whose publish it missed.

// changeLogLength caps the change log (XADD MAXLEN ~).
const changeLogLength = 10000

// streamPollInterval is how often the change log is read for entries the
// subscription may have missed.
const streamPollInterval = time.Second

// changeLogEntry is the entry for a write of rule k/id as f (nil: a
// delete), as field/value pairs: the rule, the operation, the version of an
// upsert, and the publish time (unix ns) that observeDelay measures from.
func changeLogEntry(k rulestore.Kind, id string, f rulestore.Fields) []any {
	e := []any{"type", k.String(), "id", id}
	if f == nil {
		e = append(e, "op", "delete")
	} else {
		e = append(e, "op", "upsert", "version", rulestore.Version(f))
	}
	return append(e, "published_at", strconv.FormatInt(time.Now().UnixNano(), 10))
}

// changeLogAdd is the XADD of one entry, capped at changeLogLength.
func (s *redisSource) changeLogAdd(entry []any) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: s.names.Stream(), MaxLen: changeLogLength, Approx: true, Values: entry}
}

// streamTail remembers the newest change-log entry.
func (s *redisSource) streamTail(ctx context.Context) error {
	entries, err := s.client.XRevRangeN(ctx, s.names.Stream(), "+", "-", 1).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	s.streamID = "0-0"
	if len(entries) > 0 {
		s.streamID = entries[0].ID
	}
	return nil
}

// pollStream applies change-log entries newer than the last one read. It
// catches changes written through Sluice whose publish was missed.
func (s *redisSource) pollStream(ctx context.Context) error {
	for {
		entries, err := s.client.XRangeN(ctx, s.names.Stream(), "("+s.streamID, "+", 500).Result()
		if err != nil && err != redis.Nil {
			return err
		}
		// Entries name rules written through Sluice: re-read them all in
		// one batch, past the absent-id cache (a write is authoritative).
		refs := make([]rulestore.RuleRef, 0, len(entries))
		values := make([]map[string]any, 0, len(entries))
		seen := make([]int64, 0, len(entries))
		for _, e := range entries {
			s.streamID = e.ID
			typ, _ := e.Values["type"].(string)
			id, _ := e.Values["id"].(string)
			k, ok := rulestore.ParseKind(typ)
			if !ok || rulestore.ValidID(id) != nil {
				continue
			}
			refs = append(refs, rulestore.RuleRef{Kind: k, ID: id})
			values = append(values, e.Values)
			seen = append(seen, s.refreshed[rulestore.RuleRef{Kind: k, ID: id}])
		}
		if err := s.refreshAll(ctx, refs); err != nil {
			return err
		}
		for i := range refs {
			s.observeDelay(values[i], seen[i])
		}
		if len(entries) < 500 {
			return nil
		}
	}
}

// observeDelay records the propagation delay of a change-log entry written
// by the admin API (it carries published_at): until the rule was first
// re-read after the publish (by its Pub/Sub message: seen), or until now if
// only this poll caught it. Clock skew between the writing instance and this
// one is included; a negative delay counts as 0.
func (s *redisSource) observeDelay(values map[string]any, seen int64) {
	v, _ := values["published_at"].(string)
	pub, err := strconv.ParseInt(v, 10, 64)
	if err != nil || pub <= 0 {
		return
	}
	at := time.Now().UnixNano()
	if seen >= pub {
		at = seen
	}
	rulestore.ObservePropagation(max(float64(at-pub), 0) / 1e9)
}
