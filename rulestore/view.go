package rulestore

import (
	"context"
	"net/http"
	"strings"
)

// A View answers GET /sluice/{resource}/{rest} for a handler package: a
// read-only look at live state that takes a path, such as
// /sluice/quota/{rule}/{key}. rest is the path after "/sluice/{resource}/"
// as the client escaped it (a key may hold a "/", sent as %2F), for the
// view to split and unescape; ctx is the admin request's. Return an *ActionError to choose the
// status of a failure (400 otherwise).
type View func(ctx context.Context, app *App, rest string) (any, error)

var views registry[View]

// RegisterView serves GET /sluice/{resource}/... with fn; other methods
// get 405. Call it from init.
func RegisterView(resource string, fn View) { views.put(resource, fn) }

// serveView answers a request for a registered view, or reports false
// when the path names none.
func (a *App) serveView(w http.ResponseWriter, r *http.Request) (bool, error) {
	escaped := strings.TrimPrefix(r.URL.EscapedPath(), "/sluice/")
	resource, rest, _ := strings.Cut(escaped, "/")
	fn := views.get(resource)
	if fn == nil {
		return false, nil
	}
	if r.Method != http.MethodGet {
		return true, methodNotAllowed(w, r, http.MethodGet)
	}
	out, err := fn(r.Context(), a, rest)
	if err != nil {
		return true, actionAPIError(err)
	}
	return true, writeJSON(w, out)
}
