package rulestore

import "sync"

// BreakerStates answers whether a circuit_breaker rule's breaker is open,
// for a handler that routes around it (grayroute's fallback_on_open)
// without importing the circuitbreaker package. That package registers
// how to make one; each config's store makes its own on first use, so a
// handler asks the states of its own config, during a reload as well.
type BreakerStates interface {
	// IsOpen reports whether the breaker of rule id for the key value key
	// is open or forced open. It reads local memory only.
	IsOpen(id, key string) bool
}

// breakerStates holds the circuitbreaker package's constructor (see
// registry for why a package-level registry).
var breakerStates registry[func(*App) BreakerStates]

// RegisterBreakerStates sets how a store makes its BreakerStates; the
// circuitbreaker package calls it from init.
func RegisterBreakerStates(newStates func(*App) BreakerStates) {
	breakerStates.put(CircuitBreaker.String(), newStates)
}

// breakers is an App's BreakerStates, made once.
type breakers struct {
	once   sync.Once
	states BreakerStates
}

// Breakers returns this config's BreakerStates: none is open when no
// package registered a constructor.
func (a *App) Breakers() BreakerStates {
	a.breakers.once.Do(func() {
		a.breakers.states = noBreakers{}
		if newStates := breakerStates.get(CircuitBreaker.String()); newStates != nil {
			a.breakers.states = newStates(a)
		}
	})
	return a.breakers.states
}

type noBreakers struct{}

func (noBreakers) IsOpen(string, string) bool { return false }
