package circuitbreaker

import (
	"sync"

	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	rulestore.RegisterBreakerStates(func(store *rulestore.App) rulestore.BreakerStates {
		return &configStates{store: store}
	})
}

// configStates is one config's rulestore.BreakerStates: the rule states
// its handlers hold, by rule id. The states themselves live in the pool
// (shared), so the old and the new config of a reload index the same
// breakers and give the same answer; this index only spares IsOpen the
// pool's lock and reference count.
type configStates struct {
	store *rulestore.App
	byID  sync.Map // rule id -> *ruleState
}

// statesOf is the store's configStates, nil if another package's
// BreakerStates were registered.
func statesOf(store *rulestore.App) *configStates {
	cs, _ := store.Breakers().(*configStates)
	return cs
}

// add indexes a rule state a handler of this config took hold of.
func (c *configStates) add(id string, st *ruleState) { c.byID.Store(id, st) }

// IsOpen reports whether the breaker of rule ruleID is open or forced open.
// For a rule with a key, key is the key's resolved value (e.g. "v2" for
// `key {http.vars.gray_version}`); it is ignored for rules without a key. A
// rule with state force_open is open; otherwise a rule or key no request
// has used yet is not. The rule is read from the store, so a change (e.g.
// a state pushed to Redis) shows at once. It reads local memory only,
// takes no lock and does not allocate.
func (c *configStates) IsOpen(ruleID, key string) bool {
	var rule *Rule
	if r := c.store.Lookup(rulestore.CircuitBreaker, ruleID); r != nil {
		rule, _ = r.Value.(*Rule)
	}
	var st *ruleState
	if v, ok := c.byID.Load(ruleID); ok {
		st = v.(*ruleState)
	}
	mode := ModeAuto
	if rule != nil {
		mode = rule.Settings.Mode
	}
	if st != nil {
		if m := st.override.Load(); m != 0 {
			mode = Mode(m - 1)
		}
	}
	switch mode {
	case ModeForceOpen:
		return true
	case ModeForceClosed, ModeDisabled:
		return false
	}
	if st == nil {
		return false
	}
	if rule != nil {
		st.use(rule)
	}
	b := st.lookup(key)
	return b != nil && b.IsOpen()
}
