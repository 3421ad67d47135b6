package ratelimit

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/ratelimit/report"
	"go.uber.org/zap"
)

// limiter is the state of one rule id, shared by every handler using it and
// kept across config reloads (handlerkit.Shared). When the rule changes it
// keeps the counters if the engine kind is the same, else starts afresh.
type limiter struct {
	id       string
	counters *ruleCounters
	flow     flowMetrics
	inline   *Rule // the parse of an inline rule, shared by its handlers
	// inlineDigest is the digest of inline's fields.
	inlineDigest [sha256.Size]byte
	state        atomic.Pointer[limiterState]
	backend      atomic.Pointer[cluster.BackendRef] // Redis for scope cluster
	mu           sync.Mutex                         // serialises rule changes
	now          func() int64
	stop         chan struct{}
	once         sync.Once
	exceeded     report.ExceededSampler // ratelimit_exceeded events (admin.go)
	debt         report.DebtLog         // ratelimit_debt events (debt.go)
	// listed: some handler has the rule among several limits, whose
	// refunds a cluster engine's remembered refusals must not outlive
	// long (cluster.Host).
	listed  atomic.Bool
	nodes   nodeTable                       // the rule's nodes in trees of nested quotas (nested_state.go)
	rec     atomic.Pointer[replay.Recorder] // the rule's recent traffic (record.go)
	inlined atomic.Bool                     // an inline rule's: previews cannot name it, so not recorded
}

type limiterState struct {
	rule   *Rule
	engine Engine
}

func newLimiter(id string, now func() int64) *limiter {
	if now == nil {
		now = engine.Now
	}
	l := &limiter{id: id, now: now, stop: make(chan struct{}), counters: countersFor(id), flow: flowMetricsFor(id)}
	go l.janitor()
	return l
}

// engine returns the engine for rule r, adopting r if it is new.
func (l *limiter) engine(r *Rule) Engine {
	if s := l.state.Load(); s != nil && s.rule == r {
		return s.engine
	}
	return l.adopt(r)
}

func (l *limiter) adopt(r *Rule) Engine {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s != nil && s.rule == r {
		return s.engine
	}
	if s != nil {
		l.rekeyed(s.rule, r)
		switch old := s.engine.(type) {
		case *localEngine:
			if !r.Cluster() && old.Holds(&r.Spec) && old.SlotsOnly() == r.InFlightOnly {
				l.store(r, old)
				return old
			}
		case *clusterEngine:
			if old.fits(r) {
				l.store(r, old)
				return old
			}
		}
	}
	var e Engine
	if r.Cluster() {
		e = newClusterEngine(r, l)
	} else {
		e = newLocalEngine(r)
	}
	l.store(r, e)
	if s != nil {
		if old, ok := s.engine.(*localEngine); ok {
			old.Table().SettlementsTo(l.counters.settled)
		}
	}
	return e
}

// store publishes rule r with engine e, after fitting e's flow state (the
// adaptive limit) to r, so no request sees r without it.
func (l *limiter) store(r *Rule, e Engine) {
	if le, ok := e.(*localEngine); ok {
		le.configureFlow(r, l.now())
	}
	l.state.Store(&limiterState{rule: r, engine: e})
}

// setBackend points the limiter's cluster engine at a config's Redis; the
// newest config to use the rule id wins.
func (l *limiter) setBackend(b Backend, logger *zap.Logger) {
	if cur := l.backend.Load(); cur != nil && cur.B == b {
		return
	}
	l.backend.Store(&cluster.BackendRef{B: b, Logger: logger})
}

// intern returns the one *Rule every handler of an inline rule uses, so the
// hot path's pointer comparison sees no change between them. A rule of
// other fields (digest) under the id replaces it: a reload changed the
// block (a config cannot declare one id twice with other fields, see
// handlerkit's StateID).
func (l *limiter) intern(r *Rule, digest [sha256.Size]byte) *Rule {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inlined.Store(true)
	if l.inline == nil || l.inlineDigest != digest {
		l.inline, l.inlineDigest = r, digest
	}
	return l.inline
}

// janitor drops idle keys now and then, so memory comes back even for keys
// never seen again.
func (l *limiter) janitor() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if s := l.state.Load(); s != nil {
				if e, ok := s.engine.(interface{ sweep(now, idle int64) }); ok {
					e.sweep(l.now(), s.rule.Idle)
				}
			}
		}
	}
}

// Destruct stops the janitor; the pool calls it when no config uses the
// rule id any more. The rule's counters need no dropping: the collector
// reports live limiters only.
func (l *limiter) Destruct() error {
	l.once.Do(func() {
		close(l.stop)
		dropFlowMetrics(l.id)
	})
	return nil
}

// settledTokens are the tokens the rule's settlements charged and
// refunded beyond what admission spent, for the metrics.
func (l *limiter) settledTokens() (charged, refunded uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	charged, refunded = l.counters.charged.Load(), l.counters.refunded.Load()
	if s := l.state.Load(); s != nil {
		if e, ok := s.engine.(*localEngine); ok {
			c, r := e.Table().Settled()
			charged, refunded = charged+c, refunded+r
		}
	}
	return charged, refunded
}
