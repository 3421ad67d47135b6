package rulestore

import "context"

// A View answers GET /sluice/{resource}/{rest} for a handler package: a
// read-only look at live state that takes a path, such as
// /sluice/quota/{rule}/{key}. rest is the path after "/sluice/{resource}/"
// as the client escaped it (a key may hold a "/", sent as %2F), for the
// view to split and unescape, followed by "?" and the raw query if the
// request has one; ctx is the admin request's. Return an *ActionError to choose the
// status of a failure (400 otherwise).
type View func(ctx context.Context, app *App, rest string) (any, error)

var views registry[View]

// RegisterView serves GET /sluice/{resource}/... with fn; other methods
// get 405. Call it from init.
func RegisterView(resource string, fn View) { views.put(resource, fn) }

// LookupView returns the view registered for resource, or nil.
func LookupView(resource string) View { return views.get(resource) }
