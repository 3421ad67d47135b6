package ratelimit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/rulestore"
)

const ms = int64(time.Millisecond)

func TestFlowRuleErrorsNameTheField(t *testing.T) {
	cases := []struct {
		f     rulestore.Fields
		field string
		msg   string
	}{
		{rulestore.Fields{"qps": "10", "max_queue_wait": "100ms"}, "max_queue_wait", "pace or warm_up_pace, or max_concurrent adaptive only"},
		{rulestore.Fields{"qps": "10", "control_behavior": "warm_up", "max_queue_wait": "100ms", "warm_up_period": "10s"}, "max_queue_wait", "pace or warm_up_pace, or max_concurrent adaptive only"},
		{rulestore.Fields{"qps": "10", "max_queued": "10"}, "max_queued", "pace or warm_up_pace, or max_concurrent adaptive only"},
		{rulestore.Fields{"qps": "10", "control_behavior": "pace", "max_queue_wait": "soon"}, "max_queue_wait", "duration"},
		{rulestore.Fields{"qps": "10", "control_behavior": "pace", "max_queued": "0"}, "max_queued", "from 1"},
		{rulestore.Fields{"qps": "10", "control_behavior": "pace", "burst": "20"}, "burst", "does not apply"},
		{rulestore.Fields{"qps": "10", "control_behavior": "leaky"}, "control_behavior", "want reject, pace"},
		{rulestore.Fields{"qps": "10", "control_behavior": "pace", "limit_type": "sliding_window"}, "control_behavior", "token_bucket only"},
		{rulestore.Fields{"qps": "10", "control_behavior": "warm_up_pace", "warm_up_period": "10s", "scope": "cluster", "lease_size": "5"}, "lease_size", "reserves its own slot"},
		{rulestore.Fields{"qps": "10", "control_behavior": "pace", "scope": "cluster", "lease_size": "5"}, "lease_size", "reserves its own slot"},
		{rulestore.Fields{"qps": "10", "control_behavior": "warm_up"}, "warm_up_period", "required"},
		{rulestore.Fields{"qps": "10", "control_behavior": "warm_up", "warm_up_period": "10s", "cold_factor": "1"}, "cold_factor", "> 1"},
		{rulestore.Fields{"qps": "10", "control_behavior": "warm_up", "warm_up_period": "10s", "cold_factor": "0.5"}, "cold_factor", "> 1"},
		{rulestore.Fields{"qps": "10", "cold_factor": "3"}, "cold_factor", "warm_up or warm_up_pace only"},
		{rulestore.Fields{"qps": "10", "warm_up_period": "3s"}, "warm_up_period", "warm_up or warm_up_pace only"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "min_limit": "50", "max_limit": "10"}, "min_limit", "exceeds max_limit 10"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "initial_limit": "5", "min_limit": "10"}, "initial_limit", "outside"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "scope": "cluster"}, "max_concurrent", "scope local"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "latency_tolerance": "-1"}, "latency_tolerance", "from 0"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "sample_window": "1ms"}, "sample_window", "from 10ms"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "adaptive", "sample_window": "1s", "min_rtt_interval": "2s"}, "min_rtt_interval", "4 sample windows"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "5", "min_limit": "2"}, "min_limit", "max_concurrent adaptive only"},
		{rulestore.Fields{"qps": "10", "max_concurrent": "lots"}, "max_concurrent", "or adaptive"},
	}
	for _, c := range cases {
		_, err := ParseRule("t", c.f)
		var fe *rulestore.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: got %v, want a FieldError on %s containing %q", c.f, err, c.field, c.msg)
		}
	}
	r := mustRule(t, rulestore.Fields{"qps": "100", "control_behavior": "warm_up_pace", "warm_up_period": "30s", "max_queue_wait": "250ms"})
	if r.Flow.Behavior != WarmUpPace || r.Flow.ColdFactor != DefaultColdFactor || r.Flow.MaxQueueWait != int64(250*time.Millisecond) || r.Flow.MaxQueued != DefaultMaxQueued {
		t.Fatalf("parsed %+v", r.Flow)
	}
	r = mustRule(t, rulestore.Fields{"qps": "100", "max_concurrent": "Adaptive", "max_limit": "10"})
	if a := r.Flow.Adaptive; a == nil || a.MaxLimit != 10 || a.InitialLimit != 10 || a.MinLimit != DefaultMinLimit || r.MaxConcurrent != 0 {
		t.Fatalf("parsed %+v %+v", r.Flow.Adaptive, r)
	}
	for _, name := range flowFields {
		if fields.Lookup(name) == nil {
			t.Errorf("%s missing from the field table", name)
		}
	}
}

func TestEnginePacesWithBoundedQueue(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "100", "control_behavior": "pace", "max_queue_wait": "1s", "max_queued": "3", "key_resolver": "global"})
	e := newLocalEngine(r)
	now := 5 * sec
	key := []byte("global")
	var held []Decision
	for i := 0; i < 4; i++ {
		d := e.Take(r, key, now)
		if !d.OK() || d.Wait != int64(i)*10*ms {
			t.Fatalf("take %d: %+v", i, d)
		}
		held = append(held, d)
	}
	// The schedule has room (slot 40ms < 1s) but 3 are waiting: refused.
	d := e.Take(r, key, now)
	if d.Reason != RateLimited || d.RetryAfter != 40*ms || e.Queued().Load() != 3 {
		t.Fatalf("queue full: %+v queued=%d", d, e.Queued().Load())
	}
	held[1].Queued.Add(-1) // one waiter's turn came (the handler does this)
	if d := e.Take(r, key, now); !d.OK() || d.Wait != 40*ms {
		t.Fatalf("after a waiter left: %+v", d)
	}
}

// The adaptive limit lives in the engine and survives a rule change (what
// it learnt is kept); a rule without it drops it.
func TestEngineAdaptiveLimitKeptAcrossRuleChanges(t *testing.T) {
	r := mustRule(t, rulestore.Fields{"qps": "1e6", "max_concurrent": "adaptive", "min_limit": "2", "initial_limit": "4", "key_resolver": "global"})
	l := newLimiter("adaptive-test", func() int64 { return 5 * sec })
	defer l.Destruct()
	e := l.engine(r).(*localEngine)
	c := e.Adaptive()
	if c == nil || c.Limit() != 3 { // the first probe: ¾ of initial_limit 4, at least min_limit 2
		t.Fatalf("controller %v", c)
	}
	r2 := mustRule(t, rulestore.Fields{"qps": "1e6", "max_concurrent": "adaptive", "min_limit": "2", "max_limit": "8", "key_resolver": "global"})
	if e2 := l.engine(r2).(*localEngine); e2 != e || e2.Adaptive() != c {
		t.Fatal("rule change dropped the adaptive state")
	}
	r3 := mustRule(t, rulestore.Fields{"qps": "1e6", "key_resolver": "global"})
	if l.engine(r3).(*localEngine).Adaptive() != nil {
		t.Fatal("adaptive state kept after the rule dropped it")
	}
}

// A rule with an absurdly low or high qps keeps its schedule arithmetic in
// range (no overflow into the past).
func TestFlowExtremeRates(t *testing.T) {
	for _, qps := range []string{"0.000001", "1e9"} { // the ends of qps's range
		for _, b := range []string{"pace", "warm_up", "warm_up_pace"} {
			f := rulestore.Fields{"qps": qps, "control_behavior": b, "key_resolver": "global"}
			if b != "pace" {
				f["warm_up_period"] = "24h"
			}
			r := mustRule(t, f)
			e := newLocalEngine(r)
			now := sec
			for i := 0; i < 3; i++ {
				d := e.Take(r, []byte("global"), now)
				if d.Wait < 0 || d.RetryAfter < 0 || d.Reset < 0 {
					t.Fatalf("%s qps %s take %d: %+v", b, qps, i, d)
				}
			}
		}
	}
}
