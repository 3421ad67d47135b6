package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// A rule's record is kept when the rule changes and its key stays, and
// dropped when its key changes (its records are of keys no longer made).
func TestRecordKeptWhileTheKeyStays(t *testing.T) {
	parse := func(f rulestore.Fields) *Rule {
		t.Helper()
		r, err := ParseRule("rk", f)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	lim := newLimiter("rk", nil)
	defer lim.Destruct()
	lim.engine(parse(rulestore.Fields{"qps": "5", "key_resolver": "userId"}))
	rec := lim.recorder()
	rec.Record([]byte("user:a"), replay.Arrival{At: lim.now(), Cost: 1})
	lim.engine(parse(rulestore.Fields{"qps": "1", "key_resolver": "userId"}))
	if lim.rec.Load() != rec {
		t.Fatal("a change of qps dropped the record")
	}
	lim.engine(parse(rulestore.Fields{"qps": "1", "key_resolver": "ip"}))
	if lim.rec.Load() != nil {
		t.Fatal("a change of key kept the record")
	}
}

// The record step notes each decided rule with its outcome, and leaves out
// a rule that admitted and gave its tokens back (a later rule refused).
func TestRecordStepLeavesOutRefunds(t *testing.T) {
	r, err := ParseRule("rs", rulestore.Fields{"qps": "5", "key_resolver": "userId"})
	if err != nil {
		t.Fatal(err)
	}
	lims := []*limiter{newLimiter("rs1", nil), newLimiter("rs2", nil), newLimiter("rs3", nil)}
	for _, l := range lims {
		defer l.Destruct()
	}
	kb := []byte("user:a")
	at := lims[0].now()
	ts := []taken{
		{m: member{rule: r, lim: lims[0]}, decided: true, cost: 2, kto: len(kb)}, // admitted, then refunded
		{m: member{rule: r, lim: lims[1]}, decided: true, cost: 1, kto: len(kb)}, // refused it
		{m: member{rule: r, lim: lims[2]}, kto: len(kb)},                         // not consulted
	}
	ts[0].d.At, ts[1].d.At = at, at
	ts[1].d.Reason = RateLimited
	record(ts, kb)
	if lims[0].rec.Load() != nil || lims[2].rec.Load() != nil {
		t.Error("a refunded rule or a rule not consulted was recorded")
	}
	tr := lims[1].rec.Load().Snapshot(at)
	var got []replay.Record
	for i := range tr.Shards {
		got = append(got, tr.Shards[i].Records...)
	}
	if len(got) != 1 || got[0].At != at || got[0].Cost != 1 || got[0].Outcome != replay.RateRefused {
		t.Errorf("recorded %+v, want one rate refusal of cost 1 at the decision's time", got)
	}
}

// An inline rule is not recorded: a preview asks for a rule of the store
// by id, and cannot name it.
func TestRecordStepSkipsInlineRules(t *testing.T) {
	f := rulestore.Fields{"qps": "5", "key_resolver": "userId"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(r.ID, nil)
	defer lim.Destruct()
	r = lim.intern(r, f.Digest())
	kb := []byte("user:a")
	ts := []taken{{m: member{rule: r, lim: lim}, decided: true, admitted: true, cost: 1, kto: len(kb)}}
	ts[0].d.At = lim.now()
	record(ts, kb)
	if lim.rec.Load() != nil {
		t.Error("an inline rule was recorded")
	}
}
