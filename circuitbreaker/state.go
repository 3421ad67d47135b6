package circuitbreaker

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// MaxKeys bounds the keyed breakers of one rule; calls with further keys
// share the rule's default breaker, so clients cannot grow memory unbounded.
const MaxKeys = 10000

// maxKeyLength: longer key values are stored by their hash.
const maxKeyLength = 256

// shared keeps each rule id's breakers across config reloads.
var shared = handlerkit.NewShared[*ruleState]()

// ruleState is the breakers of one rule id: the default one, and one per
// key value when the rule has a key.
type ruleState struct {
	id      string
	rule    atomic.Pointer[Rule] // the rule last applied
	def     *Breaker
	keys    sync.Map // key value -> *Breaker
	nkeys   atomic.Int64
	mu      sync.Mutex // serialises applying a rule and adding keys
	metrics *ruleMetrics
	// override is an administrator's runtime state for this instance
	// (POST /sluice/breakers/{id}/...): 0 none, else Mode+1. It wins over
	// the rule's state field until reset.
	override atomic.Int32
	// warnedTooMany: the key limit was logged (once per rule state).
	warnedTooMany atomic.Bool
	// recent keeps the transitions of the last hour for the status page.
	recent transitionLog
	// calls is the record of recent calls, for previews (calls_record.go).
	calls *callRecorder
}

func newRuleState(id string) *ruleState {
	st := &ruleState{id: id, metrics: newRuleMetrics(id), calls: newCallRecorder()}
	st.def = NewBreaker(Settings{SuccessThreshold: 1, OpenDuration: 1, HalfOpenRequests: 1}, nil, st.onTransition("", true))
	return st
}

// Destruct runs when no config uses the rule id any more.
func (st *ruleState) Destruct() error {
	st.metrics.delete()
	return nil
}

// use makes sure the breakers run with rule r. A changed rule is a new
// pointer, so the common case is one atomic load and a compare.
func (st *ruleState) use(r *Rule) {
	if st.rule.Load() == r {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if cur := st.rule.Load(); cur != nil && cur.Settings == r.Settings {
		st.rule.Store(r) // same thresholds (e.g. a reload): nothing to apply
		return
	}
	st.rule.Store(r)
	st.apply(st.settings(r))
}

// settings are the rule's settings with the runtime override applied.
func (st *ruleState) settings(r *Rule) Settings {
	s := r.Settings
	if m := st.override.Load(); m != 0 {
		s.Mode = Mode(m - 1)
	}
	return s
}

// mode is the state mode in force: the override, else the rule's.
func (st *ruleState) mode(r *Rule) Mode {
	if m := st.override.Load(); m != 0 {
		return Mode(m - 1)
	}
	return r.Settings.Mode
}

// apply sets every breaker of the rule to s; the caller holds mu.
func (st *ruleState) apply(s Settings) {
	st.def.SetSettings(s)
	st.keys.Range(func(_, b any) bool {
		b.(*Breaker).SetSettings(s)
		return true
	})
	st.metrics.setState("", st.def.State())
}

// shownKey is a key value as logs, events and the state endpoint show it:
// masked unless the rule in force sets raw_keys.
func (st *ruleState) shownKey(key string) string {
	if r := st.rule.Load(); key == "" || r != nil && r.RawKeys {
		return key
	}
	return handlerkit.MaskKey(key)
}

// forKey returns the breaker for a resolved key value; the default breaker
// for an empty value or once MaxKeys is reached.
func (st *ruleState) forKey(v string) *Breaker {
	if v == "" {
		return st.def
	}
	if len(v) > maxKeyLength {
		v = hashKey(v)
	}
	if b, ok := st.keys.Load(v); ok {
		return b.(*Breaker)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if b, ok := st.keys.Load(v); ok {
		return b.(*Breaker)
	}
	if st.nkeys.Load() >= MaxKeys {
		st.logTooManyKeys()
		return st.def
	}
	r := st.rule.Load()
	exported := st.metrics.exportKey()
	b := NewBreaker(st.settings(r), nil, st.onTransition(v, exported))
	st.keys.Store(v, b)
	st.nkeys.Add(1)
	if exported {
		st.metrics.setState(st.shownKey(v), b.State())
	}
	return b
}

// lookup returns the breaker for a key value without creating it.
func (st *ruleState) lookup(v string) *Breaker {
	r := st.rule.Load()
	if r == nil || r.Key == "" || v == "" {
		return st.def
	}
	if len(v) > maxKeyLength {
		v = hashKey(v)
	}
	if b, ok := st.keys.Load(v); ok {
		return b.(*Breaker)
	}
	return nil
}

func hashKey(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// keySnapshot is one keyed breaker's state, its key as shownKey shows it.
type keySnapshot struct {
	Key string
	Snapshot
}

// keySnapshots reads up to max keyed breakers, in no particular order.
func (st *ruleState) keySnapshots(max int) []keySnapshot {
	var out []keySnapshot
	st.keys.Range(func(k, b any) bool {
		out = append(out, keySnapshot{st.shownKey(k.(string)), b.(*Breaker).Snapshot()})
		return len(out) < max
	})
	return out
}

// setOverride sets the runtime override (0 none, else Mode+1) on every
// breaker of the rule; reset also moves them to the mode's state with
// fresh counters.
func (st *ruleState) setOverride(override int32, reset bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.override.Store(override)
	var s Settings
	if r := st.rule.Load(); r != nil {
		s = st.settings(r)
	} else {
		// No request has used the rule yet: keep the placeholder settings,
		// change the mode; the rule's own settings apply on first use.
		s = st.def.Settings()
		s.Mode = ModeAuto
		if override != 0 {
			s.Mode = Mode(override - 1)
		}
	}
	st.apply(s)
	if reset {
		st.def.Reset()
		st.keys.Range(func(_, b any) bool {
			b.(*Breaker).Reset()
			return true
		})
		st.metrics.setState("", st.def.State())
	}
}
