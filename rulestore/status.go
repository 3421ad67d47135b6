package rulestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
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
func (n keyNames) StatusKey(k Kind, id string) string {
	return n.prefix + statusKeyPrefix + k.String() + ":" + id
}

// instanceName names this process in verdicts and history: host:pid.
var instanceName = func() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", h, os.Getpid())
}()

// Verdict is one instance's answer to one version of a rule, as written to
// the status hash (JSON in the field named after the instance).
type Verdict struct {
	// State is accepted, rejected or deleted.
	State string `json:"state"`
	// Version is the version of the raw Redis fields answered.
	Version string `json:"version,omitempty"`
	// Field is the field at fault (rejected).
	Field string `json:"field,omitempty"`
	// Error says why the version was rejected.
	Error string `json:"error,omitempty"`
	// At is when the instance answered, RFC 3339, UTC.
	At string `json:"at"`
	// Heartbeat is the instance's member in gateway:instances: while its
	// score (expiry, unix ms) is ahead, the instance is live; else the
	// verdict is a stopped instance's, not a lagging one.
	Heartbeat string `json:"heartbeat,omitempty"`
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
	invalid  map[RuleRef]InvalidRule
	unused   map[RuleRef]bool // not declared here, stored fields incomplete (unused.go)
	failLog  time.Time
	skipped  skippedKeys
}

type pendingStatus struct {
	ref  RuleRef
	json string
}

func (fb *feedback) verdict(k Kind, id string, f Fields, err error) {
	now := time.Now().UTC()
	v := Verdict{State: "accepted", At: now.Format(time.RFC3339Nano)}
	if f != nil {
		v.Version = Version(f)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := RuleRef{k, id}
	delete(fb.unused, ref)
	if err != nil {
		v.State, v.Error = "rejected", clipN(err.Error(), 512)
		var fe *FieldError
		if errors.As(err, &fe) {
			v.Field = clip(fe.Field)
		}
		if fb.invalid == nil {
			fb.invalid = map[RuleRef]InvalidRule{}
		}
		since := now
		if prev, ok := fb.invalid[ref]; ok {
			since = prev.Since
		}
		var stored Fields
		if ruleSize(f) <= MaxRuleBody {
			stored = f
		}
		fb.invalid[ref] = InvalidRule{Kind: k.String(), ID: id, Problem: "rejected", Version: v.Version,
			Field: v.Field, Reason: v.Error, Since: since, Stored: storedFields(f), fields: stored}
	} else {
		delete(fb.invalid, ref)
	}
	fb.add(ref, v)
}

// deleted records that the rule's hash is gone from Redis. declared is
// the version this instance serves now: its config's rule ("" if it
// declares none), the version a writer waits on after an undo.
func (fb *feedback) deleted(k Kind, id, declared string) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	ref := RuleRef{k, id}
	delete(fb.invalid, ref)
	fb.add(ref, Verdict{State: "deleted", Version: declared, At: time.Now().UTC().Format(time.RFC3339Nano)})
}

func (fb *feedback) add(ref RuleRef, v Verdict) {
	v.Heartbeat = fb.heartbeat
	b, _ := json.Marshal(v)
	if len(fb.pending) < maxFeedback { // bounded if Redis stays unwritable
		fb.pending = append(fb.pending, pendingStatus{ref, string(b)})
	}
}

func (fb *feedback) rejected() []InvalidRule {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	out := make([]InvalidRule, 0, len(fb.invalid))
	for _, r := range fb.invalid {
		out = append(out, r)
	}
	return out
}

// applied is called for every change the source applies: it emits the
// event, and queues the history entry and (for a delete) the verdict.
func (s *redisSource) applied(k Kind, id string, old *Rule, f Fields) {
	op := "upsert"
	if f == nil {
		op = "delete"
		s.feedback.deleted(k, id, storedVersion(s.staticRule(k, id), nil))
		s.feedback.queueLastGood(lastGoodOp{ref: RuleRef{k, id}, mode: "del"})
	}
	emitUpdated(k, id, op, "redis", f)
	var prev Fields
	if old != nil {
		prev = old.Fields
	}
	s.feedback.mu.Lock()
	if len(s.feedback.changes) < maxFeedback {
		s.feedback.changes = append(s.feedback.changes, newHistoryEntry(k, id, s.staticRule(k, id), prev, f, "redis", ""))
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
		pipe.HSet(ctx, key, instanceName, p.json)
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

// InvalidRule is a rule id that is not in force as its writer or a handler
// expects: rejected (the last version in Redis failed validation) or missing
// (a handler refers to it but the store holds no such rule).
type InvalidRule struct {
	// Kind is the rule's kind: rate_limit, circuit_breaker, gray, binding or
	// one another module registers.
	Kind string `json:"kind"`
	// ID is the rule's id (a route name for a binding).
	ID string `json:"id"`
	// Problem is rejected or missing.
	Problem string `json:"problem"`
	// Version is the rejected version of the raw Redis fields.
	Version string `json:"version,omitempty"`
	// Field is the field at fault (rejected).
	Field string `json:"field,omitempty"`
	// Reason says why: the validation error, or who refers to the missing rule.
	Reason string `json:"reason"`
	// Since is when the problem was first seen.
	Since time.Time `json:"since"`
	// Stored are the rejected raw fields as Redis holds them (clipped).
	Stored Fields `json:"stored,omitempty"`

	fields Fields // rejected: the stored fields, if within the size limit
}

// missingRef is a rule a handler asked for and did not find.
type missingRef struct {
	since    time.Time
	lastWarn atomic.Int64 // unix ns
}

// missingWarnEvery bounds the warnings for one missing id (with Redis; without
// Redis a missing id fails validation, so one warning is enough).
const missingWarnEvery = time.Minute

// WarnMissing records that a handler refers to a rule the store does not
// hold; requests pass through until it arrives. The id is listed as missing
// in /sluice/state and counted in sluice_rules_invalid, and logged at most
// once a minute.
func (a *App) WarnMissing(k Kind, id string) {
	a.warnMissing(k, id, "rule not found; requests pass through until it arrives")
}

// WarnMissingRefused is WarnMissing for a handler that refuses the
// requests meanwhile (on_missing_rule refuse).
func (a *App) WarnMissingRefused(k Kind, id string) {
	a.warnMissing(k, id, "rule not found; requests are refused (503) until it arrives")
}

// The warning itself, with its "did you mean" (a search of every id of
// the kind), is written by logMissing, off the request: a request through
// a binding that names a thousand ids not loaded yet only queues their
// warnings.
func (a *App) warnMissing(k Kind, id, msg string) {
	m := a.noteMissing(k, id)
	now := time.Now().UnixNano()
	last := m.lastWarn.Load()
	if last != 0 && (a.redis == nil || now-last < int64(missingWarnEvery)) {
		return
	}
	if m.lastWarn.CompareAndSwap(last, now) {
		select {
		case a.missingWarns <- missingWarn{k, id, msg, m.since}:
		default:
			m.lastWarn.Store(last) // queue full: a later request warns
		}
	}
}

// noteMissing lists a rule as missing (since now, if it was not already)
// without logging.
func (a *App) noteMissing(k Kind, id string) *missingRef {
	ref := RuleRef{k, id}
	v, ok := a.missing.Load(ref)
	if !ok {
		v, _ = a.missing.LoadOrStore(ref, &missingRef{since: time.Now().UTC()})
	}
	return v.(*missingRef)
}

// Invalid lists the rejected and missing rule ids, by kind then id.
func (a *App) Invalid() []InvalidRule {
	var out []InvalidRule
	if a.redis != nil {
		out = a.redis.Rejected()
	}
	a.missing.Range(func(key, value any) bool {
		ref := key.(RuleRef)
		if a.Lookup(ref.Kind, ref.ID) != nil {
			a.missing.Delete(key) // arrived since
			return true
		}
		out = append(out, InvalidRule{Kind: ref.Kind.String(), ID: ref.ID, Problem: "missing",
			Reason: "a handler refers to it; requests pass through unchecked until it exists",
			Since:  value.(*missingRef).since})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	if out == nil {
		out = []InvalidRule{}
	}
	return out
}

// forget drops a rejected id whose hash is gone (no version was in force
// here), and with it the fleet's last good version. Its verdict becomes
// deleted, on the version served now (declared: the config's rule, or ""),
// so the rejection no longer stands for this instance's answer.
func (fb *feedback) forget(k Kind, id, declared string) {
	fb.mu.Lock()
	_, was := fb.invalid[RuleRef{k, id}]
	fb.mu.Unlock()
	if was {
		fb.deleted(k, id, declared)
		fb.queueLastGood(lastGoodOp{ref: RuleRef{k, id}, mode: "del"})
	}
}

// reaccepted clears a rejection when the stored hash holds again the
// version in force here (a rollback, or a fix by hand), with an accepted
// verdict on every instance.
func (fb *feedback) reaccepted(k Kind, id string, f Fields) {
	fb.mu.Lock()
	_, bad := fb.invalid[RuleRef{k, id}]
	fb.mu.Unlock()
	if bad {
		fb.verdict(k, id, f, nil)
	}
}
