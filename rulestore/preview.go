package rulestore

import (
	"context"
	"sync"
	"time"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// Previews: a dry run with an impact window (WriteRequest.Impact,
// ApplyRequest.Impact) replays the recent traffic of the rule it changes
// against the rule in force and the proposed one, on every live instance
// (docs/design/previews.md). The store knows no handler: the handler
// package of a kind registers a Previewer with the app, which answers for
// this instance; with Redis, the Redis source asks the fleet and sums
// the answers (AskImpact).

// Previewer answers for this instance what a proposed rule would have done
// to the recorded traffic of rule id.
type Previewer interface {
	// Impact replays the last window of rule id's record against the rule
	// in force here and proposed (the value the kind's parser gave). With
	// no record (the rule served nothing here) it answers zero counts.
	Impact(id string, proposed any, window time.Duration) (replay.Impact, error)
}

// ImpactQuery asks for the impact of a proposed rule.
type ImpactQuery struct {
	Kind Kind
	ID   string
	// Fields are the proposed rule's effective fields.
	Fields Fields
	// Window is how far back to replay (at most MaxImpactWindow).
	Window time.Duration
	// Wait bounds how long the asker waits for the fleet's answers.
	Wait time.Duration
}

const (
	// MaxImpactWindow is the longest window a preview replays: what a
	// rule's record keeps.
	MaxImpactWindow = time.Duration(replay.DefaultWindow)
	// ImpactWait is how long a preview waits for the fleet's answers.
	ImpactWait = time.Second
)

// previewers are the app's Previewers by kind.
type previewers struct {
	mu sync.Mutex
	m  map[Kind]Previewer
}

// SetPreviewer makes p answer previews of kind k's rules (a handler's
// Provision calls it; every handler of a kind registers the same one).
func (a *App) SetPreviewer(k Kind, p Previewer) {
	a.previewers.mu.Lock()
	defer a.previewers.mu.Unlock()
	if a.previewers.m == nil {
		a.previewers.m = map[Kind]Previewer{}
	}
	a.previewers.m[k] = p
}

func (a *App) previewer(k Kind) Previewer {
	a.previewers.mu.Lock()
	defer a.previewers.mu.Unlock()
	return a.previewers.m[k]
}

// previewable reports whether kind k's rules have previews.
func previewable(k Kind) bool { return k == RateLimit || k == Gray || k == CircuitBreaker }

// checkImpact fails a query the store cannot answer: a kind without
// previews, a window out of range.
func checkImpact(k Kind, window time.Duration) error {
	if !previewable(k) {
		return Errorf(ErrInvalid, "impact: previews replay rate_limit, gray and circuit_breaker rules only, not %s", k)
	}
	if window <= 0 || window > MaxImpactWindow {
		return Errorf(ErrInvalid, "impact window %v: want from 1s to %v (what a rule's record keeps)", window, MaxImpactWindow)
	}
	return nil
}

// LocalImpact is this instance's answer to q: the proposed fields parsed
// by q's kind, replayed by the kind's Previewer. An instance whose config
// has no handler of the kind recorded nothing: zero counts.
func (a *App) LocalImpact(q ImpactQuery) (replay.Impact, error) {
	if err := checkImpact(q.Kind, q.Window); err != nil {
		return replay.Impact{}, err
	}
	v, err := Parse(q.Kind, q.ID, q.Fields)
	if err != nil {
		return replay.Impact{}, &Error{Class: ErrInvalid, Err: err}
	}
	p := a.previewer(q.Kind)
	if p == nil {
		return EmptyImpact(q.Window), nil
	}
	imp, err := p.Impact(q.ID, v, q.Window)
	if err != nil {
		return replay.Impact{}, &Error{Class: ErrInvalid, Err: err}
	}
	return imp, nil
}

// EmptyImpact is the answer of one instance that recorded nothing.
func EmptyImpact(window time.Duration) replay.Impact {
	return replay.Impact{Window: window.String(), Instances: replay.Instances{Asked: 1, Answered: 1},
		TopKeys: []replay.KeyImpact{}}
}

// Impact is the fleet's answer to q: every live instance's, summed, when
// the store follows Redis; else this instance's.
func (a *App) Impact(ctx context.Context, q ImpactQuery) (replay.Impact, error) {
	if err := checkImpact(q.Kind, q.Window); err != nil {
		return replay.Impact{}, err
	}
	if q.Wait <= 0 {
		q.Wait = ImpactWait
	}
	if a.redis == nil {
		return a.LocalImpact(q)
	}
	if _, err := Parse(q.Kind, q.ID, q.Fields); err != nil {
		return replay.Impact{}, &Error{Class: ErrInvalid, Err: err}
	}
	imp, err := a.redis.AskImpact(ctx, q)
	if err != nil && ClassOf(err) == "" {
		err = Errorf(ErrBackend, "asking the fleet for an impact: %w", err)
	}
	return imp, err
}

// checkImpactRequest fails an impact window on a write that is not a dry
// run, or one the store cannot answer (0: none asked).
func checkImpactRequest(k Kind, dryRun bool, window time.Duration) error {
	switch {
	case window == 0:
		return nil
	case !dryRun:
		return Errorf(ErrInvalid, "impact previews a change: add dry_run=true")
	}
	return checkImpact(k, window)
}

// applyImpacts sets the impact of each previewable rule a dry-run apply
// creates or changes (window 0: none).
func (a *App) applyImpacts(ctx context.Context, objs []ApplyObject, window time.Duration) error {
	for i := range objs {
		o := &objs[i]
		if window == 0 || !previewable(o.kind) || o.raw == nil || (o.Result != ApplyCreated && o.Result != ApplyChanged) {
			continue
		}
		_, f, err := ParseOver(o.kind, o.ID, a.Static(o.kind, o.ID), o.raw)
		if err != nil {
			return &Error{Class: ErrInvalid, Err: err}
		}
		imp, err := a.Impact(ctx, ImpactQuery{Kind: o.kind, ID: o.ID, Fields: f, Window: window})
		if err != nil {
			return err
		}
		o.Impact = &imp
	}
	return nil
}

// RecordClock is the coarse clock the handlers' records of recent traffic
// read (one atomic load where time.Now costs tens of ns): ticks of
// replay.CoarseTick, its goroutine running only while it is read.
func (a *App) RecordClock() *replay.Clock { return &a.recordClock }
