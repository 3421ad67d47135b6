package ratelimit

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/replay"
)

// A rule's recent traffic is recorded for previews of a change to it
// (docs/design/previews.md): each rule's limiter keeps a replay.Recorder,
// made on the rule's first decided request and kept across reloads and
// changes of the rule with the limiter (a caddy.UsagePool entry) while
// the rule's key stays the same, and the pipeline notes each
// decided request in it after the decide step (record).

// recorder returns the limiter's recorder, making it on first use: the
// default window and ring (replay.DefaultRecords, 8.25 MiB per rule,
// allocated once).
func (l *limiter) recorder() *replay.Recorder {
	if r := l.rec.Load(); r != nil {
		return r
	}
	l.rec.CompareAndSwap(nil, replay.NewRecorder(replay.DefaultWindow, replay.DefaultRecords))
	return l.rec.Load()
}

// rekeyed drops the record when a change of the rule (old to r) changed
// its key (the records are of keys the rule no longer makes) or turned
// recording off.
func (l *limiter) rekeyed(old, r *Rule) {
	if old.Key.String() != r.Key.String() || !r.Record {
		l.rec.Store(nil)
	}
}

// record notes every decided rule of a request in its rule's recorder:
// the arrival, key, cost, the in-flight counts the engine read and the
// outcome (unless the rule sets record false, or is an inline rule, which
// a preview cannot name). A rule that admitted the request and gave its tokens back (a
// later rule of the list refused it) spent nothing: it is not recorded,
// so replaying the rule alone does not spend them. It does not allocate.
func record(ts []taken, kb []byte) {
	for i := range ts {
		t := &ts[i]
		if !t.decided || t.d.OK() && !t.admitted || !t.m.rule.Record || t.m.lim.inlined.Load() {
			continue
		}
		lim, at := t.m.lim, t.d.At
		if at == 0 { // decided without the local engine (Redis, the adaptive limit)
			at = lim.now()
		}
		lim.recorder().Record(t.key(kb), replay.Arrival{At: at, Cost: t.cost,
			KeyInFlight: int64(t.d.KeyIn), TotalInFlight: int64(t.d.TotalIn), Outcome: outcomeOf(t.d.Reason)})
	}
}

// outcomeOf is a decision's reason as a record's outcome.
func outcomeOf(r engine.Reason) replay.Outcome {
	switch r {
	case engine.Allowed:
		return replay.Allowed
	case engine.RateLimited:
		return replay.RateRefused
	case engine.TooManyInFlight:
		return replay.InFlightRefused
	case engine.TooManyInFlightTotal:
		return replay.InFlightTotalRefused
	}
	return replay.OtherRefused // the adaptive limit, Redis unavailable
}
