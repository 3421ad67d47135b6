package redissource

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/sluicegw/sluice/rulestore"
	"sync"
	"time"

	"github.com/sluicegw/sluice/rulestore/history"
	"go.uber.org/zap"
)

// Feedback for raw writers: every instance writes its verdict on each rule
// version it sees to the hash gateway:status:<kind>:<id>, one field per
// instance, so `redis-cli HGETALL gateway:status:gray:<id>` shows at once
// whether the fleet took a change and why not. The hash expires statusTTL
// after its last write.
const (
	statusKeyPrefix = "gateway:status:"
	statusTTL       = 24 * time.Hour
)

// StatusKey is the verdict hash of rule id of kind k.
func (n keyNames) StatusKey(k rulestore.Kind, id string) string {
	return n.prefix + statusKeyPrefix + k.String() + ":" + id
}

// feedback collects, on the source's goroutine, the verdicts and history
// entries to write back to Redis, and keeps the rejected ids for the state
// listing and the invalid-rules gauge.
type feedback struct {
	heartbeat string // this instance's heartbeat member, set once
	// flushing is held through a flush, so flushes (the session's writer,
	// a resync's) write in the order they took their entries.
	flushing sync.Mutex
	mu       sync.Mutex
	pending  []pendingStatus
	changes  []history.Entry
	lastGood []lastGoodOp
	invalid  map[rulestore.RuleRef]rejection
	unused   map[rulestore.RuleRef]bool // not declared here, stored fields incomplete (unused.go)
	failLog  time.Time
	skipped  skippedKeys
}

type pendingStatus struct {
	ref  rulestore.RuleRef
	json string
}

func (fb *feedback) verdict(k rulestore.Kind, id string, f rulestore.Fields, err error) {
	now := time.Now().UTC()
	v := rulestore.Verdict{State: "accepted", At: now.Format(time.RFC3339Nano)}
	if f != nil {
		v.Version = rulestore.Version(f)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := rulestore.RuleRef{Kind: k, ID: id}
	delete(fb.unused, ref)
	if err != nil {
		v.State, v.Error = "rejected", rulestore.Clip(err.Error(), 512)
		var fe *rulestore.FieldError
		if errors.As(err, &fe) {
			v.Field = clip(fe.Field)
		}
		if fb.invalid == nil {
			fb.invalid = map[rulestore.RuleRef]rejection{}
		}
		since := now
		if prev, ok := fb.invalid[ref]; ok {
			since = prev.Since
		}
		var stored rulestore.Fields
		if rulestore.RuleSize(f) <= rulestore.MaxRuleBody {
			stored = f
		}
		fb.invalid[ref] = rejection{InvalidRule: rulestore.InvalidRule{Kind: k.String(), ID: id, Problem: "rejected", Version: v.Version,
			Field: v.Field, Reason: v.Error, Since: since, Stored: storedFields(f)}, fields: stored}
	} else {
		delete(fb.invalid, ref)
	}
	fb.add(ref, v)
}

// deleted records that the rule's hash is gone from Redis. declared is
// the version this instance serves now: its config's rule ("" if it
// declares none), the version a writer waits on after an undo.
func (fb *feedback) deleted(k rulestore.Kind, id, declared string) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := rulestore.RuleRef{Kind: k, ID: id}
	delete(fb.invalid, ref)
	fb.add(ref, rulestore.Verdict{State: "deleted", Version: declared, At: time.Now().UTC().Format(time.RFC3339Nano)})
}

func (fb *feedback) add(ref rulestore.RuleRef, v rulestore.Verdict) {
	v.Heartbeat = fb.heartbeat
	b, _ := json.Marshal(v)
	if len(fb.pending) < maxFeedback { // bounded if Redis stays unwritable
		fb.pending = append(fb.pending, pendingStatus{ref, string(b)})
	}
}

func (fb *feedback) rejected() []rulestore.InvalidRule {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	out := make([]rulestore.InvalidRule, 0, len(fb.invalid))
	for _, r := range fb.invalid {
		out = append(out, r.InvalidRule)
	}
	return out
}

// rejection is a rule rejected here, with its stored fields if within the
// size limit (for RejectedView).
type rejection struct {
	rulestore.InvalidRule
	fields rulestore.Fields
}

// applied is called for every change the source applies: it emits the
// event, and queues the history entry and (for a delete) the verdict.
func (s *redisSource) applied(k rulestore.Kind, id string, old *rulestore.Rule, f rulestore.Fields) {
	op := "upsert"
	if f == nil {
		op = "delete"
		s.feedback.deleted(k, id, rulestore.StoredVersion(s.staticRule(k, id), nil))
		s.feedback.queueLastGood(lastGoodOp{ref: rulestore.RuleRef{Kind: k, ID: id}, mode: "del"})
	}
	rulestore.EmitUpdated(k, id, op, "redis", f)
	var prev rulestore.Fields
	if old != nil {
		prev = old.Fields
	}
	s.feedback.mu.Lock()
	if len(s.feedback.changes) < maxFeedback {
		s.feedback.changes = append(s.feedback.changes, rulestore.NewHistoryEntry(k, id, s.staticRule(k, id), prev, f, "redis", ""))
	}
	s.feedback.mu.Unlock()
}

// flushFeedback writes the queued verdicts and history entries in one
// pipeline. It runs after the rules are applied, so it never delays one; a
// failure is logged (at most every 10s) and the entries are dropped: they
// are feedback, not rules.
func (s *redisSource) flushFeedback(ctx context.Context) {
	fb := &s.feedback
	fb.flushing.Lock()
	defer fb.flushing.Unlock()
	fb.mu.Lock()
	pending, changes, lastGood := fb.pending, fb.changes, fb.lastGood
	fb.pending, fb.changes, fb.lastGood = nil, nil, nil
	fb.mu.Unlock()
	if len(pending) == 0 && len(changes) == 0 && len(lastGood) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	for _, e := range changes {
		s.queueObserved(ctx, pipe, e)
	}
	for _, op := range lastGood {
		s.pipeLastGood(ctx, pipe, op)
	}
	// Verdicts last: a writer (or a test) that sees this instance's verdict
	// finds the history entry and last good version of the same flush.
	for _, p := range pending {
		key := s.names.StatusKey(p.ref.Kind, p.ref.ID)
		pipe.HSet(ctx, key, rulestore.InstanceName(), p.json)
		pipe.Expire(ctx, key, statusTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() == nil {
		fb.mu.Lock()
		logIt := time.Since(fb.failLog) > 10*time.Second
		if logIt {
			fb.failLog = time.Now()
		}
		fb.mu.Unlock()
		if logIt {
			s.logger.Warn("could not write rule verdicts/history to redis", zap.Error(err))
		}
	}
}

// forget drops a rejected id whose hash is gone (no version was in force
// here), and with it the fleet's last good version. Its verdict becomes
// deleted, on the version served now (declared: the config's rule, or ""),
// so the rejection no longer stands for this instance's answer.
func (fb *feedback) forget(k rulestore.Kind, id, declared string) {
	fb.mu.Lock()
	_, was := fb.invalid[rulestore.RuleRef{Kind: k, ID: id}]
	fb.mu.Unlock()
	if was {
		fb.deleted(k, id, declared)
		fb.queueLastGood(lastGoodOp{ref: rulestore.RuleRef{Kind: k, ID: id}, mode: "del"})
	}
}

// reaccepted clears a rejection when the stored hash holds again the
// version in force here (a rollback, or a fix by hand), with an accepted
// verdict on every instance.
func (fb *feedback) reaccepted(k rulestore.Kind, id string, f rulestore.Fields) {
	fb.mu.Lock()
	_, bad := fb.invalid[rulestore.RuleRef{Kind: k, ID: id}]
	fb.mu.Unlock()
	if bad {
		fb.verdict(k, id, f, nil)
	}
}

// maxFeedback bounds each queue of feedback (verdicts, history entries,
// last-good writes) waiting to be written to Redis, if it stays unwritable.
const maxFeedback = 100_000
