package ratelimit

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/overload"
)

// localEngine is the engine of a local rule (engine.Local) taking the
// handler's rule: the engine reads the rule's engine.Spec.
type localEngine struct{ engine.Local }

func newLocalEngine(r *Rule) *localEngine {
	e := new(localEngine)
	e.Init(&r.Spec, r.InFlightOnly)
	return e
}

// newSlotsEngine is an engine counting rule r's in-flight slots only.
func newSlotsEngine(r *Rule) *localEngine {
	e := new(localEngine)
	e.Init(&r.Spec, true)
	return e
}

// Take admits or refuses a request of the rule's cost.
func (e *localEngine) Take(r *Rule, key []byte, now int64) Decision {
	return e.TakeCost(&r.Spec, key, now, r.Cost)
}

// take is Take for a request of cost tokens.
func (e *localEngine) take(r *Rule, key []byte, now int64, cost int64) Decision {
	return e.TakeCost(&r.Spec, key, now, cost)
}

// adaptiveOf is the adaptive limit of a local engine, if it has one.
func adaptiveOf(eng Engine) *overload.Controller {
	if le, ok := eng.(*localEngine); ok {
		return le.Adaptive()
	}
	return nil
}

// settle charges n tokens to key's state in this process (engine.Local.Settle).
func (e *localEngine) settle(r *Rule, key []byte, now, n int64) (debt bool) {
	return e.Settle(&r.Spec, key, now, n)
}

// settleAt is settle at the entry the request was admitted on (engine.Local.SettleAt).
func (e *localEngine) settleAt(r *Rule, key []byte, ref engine.EntryRef, clock func() int64, n int64) (debt, counted bool) {
	return e.SettleAt(&r.Spec, key, ref, clock, n)
}

// debt counts the keys of r in debt at now and what they owe.
func (e *localEngine) debt(r *Rule, now int64) (keys int64, owed float64) {
	return e.Debt(&r.Spec, now)
}

// configureFlow fits the engine's adaptive limit to r.
func (e *localEngine) configureFlow(r *Rule, now int64) { e.ConfigureFlow(&r.Spec, now) }

// TopKeys returns the n keys using most of their quota at now.
func (e *localEngine) TopKeys(r *Rule, now int64, n int) []engine.KeyUse {
	return e.Local.TopKeys(&r.Spec, now, n)
}

// peekTrace is the state key starts from on its next request (engine.Local.PeekTrace).
func (e *localEngine) peekTrace(r *Rule, key []byte, now int64) (engine.Snapshot, bool) {
	return e.PeekTrace(&r.Spec, key, now)
}
