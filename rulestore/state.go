package rulestore

import (
	"context"
	"github.com/sluicegw/sluice/rulestore/status"
)

// A StateReporter returns a handler package's live state for GET
// /sluice/state, as a value encoding/json can write. It runs on an admin
// request, so it may take locks briefly but must bound its output.
type StateReporter func() any

var reporters registry[StateReporter]

// RegisterStateReporter adds a section named name to GET /sluice/state.
// Handler packages call it from init.
func RegisterStateReporter(name string, fn StateReporter) { reporters.put(name, fn) }

// An ActionFunc runs POST /sluice/{resource}/{id}/{action} for the running
// config's store app, within the admin request's context (cancelled when
// the client goes); the result is written as JSON. Return an *ActionError
// to choose the status.
type ActionFunc func(ctx context.Context, app *App, id, action string) (any, error)

// ActionError is an action's failure with its HTTP status.
type ActionError struct {
	// Status is the HTTP status of the answer (e.g. 404).
	Status int
	// Err says what went wrong; the answer's error message.
	Err error
}

func (e *ActionError) Error() string { return e.Err.Error() }

var actions registry[ActionFunc]

// RegisterAction serves POST /sluice/{resource}/{id}/{action} with fn,
// e.g. resource "breakers". Handler packages call it from init.
func RegisterAction(resource string, fn ActionFunc) { actions.put(resource, fn) }

// LookupAction returns the action registered for resource, or nil.
func LookupAction(resource string) ActionFunc { return actions.get(resource) }

// StoreState is the rule store's part of GET /sluice/state
// (status.StoreState).
type StoreState = status.StoreState

// RuleVersion is one rule's version and where it comes from
// (status.RuleVersion).
type RuleVersion = status.RuleVersion

// State returns the whole of GET /sluice/state: the store's section under
// "rulestore", then each registered reporter's section.
func (a *App) State() map[string]any {
	st := StoreState{Status: a.Status(), Writes: a.WritesTo(), Versions: map[string]map[string]RuleVersion{}, Invalid: a.Invalid()}
	for _, k := range Kinds() {
		m := map[string]RuleVersion{}
		for id, r := range a.Rules(k) {
			m[id] = RuleVersion{Version: r.Version(), Source: r.Source}
		}
		st.Versions[k.String()] = m
	}
	out := map[string]any{"rulestore": st}
	names, fns := reporters.sorted()
	for _, name := range names {
		out[name] = fns[name]()
	}
	return out
}
