// Package admin is the rule store's admin surface: the Caddy admin API
// module (admin.api.sluice) with the /sluice/... endpoints (rules and
// bindings with ETag, If-Match and dry runs, history, rollback, verdicts,
// all-or-nothing apply, state, actions and views), and the status page,
// served on the admin listener and by the sluice_status HTTP handler. The
// store itself, its state and its records, stay in package rulestore.
package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves Sluice's rules and live state on Caddy's admin endpoint,
// so it inherits the admin API's access controls:
//
//	GET    /sluice/rules               the kinds, with their counts
//	GET    /sluice/rules/{kind}        every rule of a kind (rate_limit, circuit_breaker, gray, binding)
//	GET    /sluice/rules/{kind}/{id}   one rule, with its ETag
//	PUT    /sluice/rules/{kind}/{id}   validate, then write (Redis: hash, history, change log, publish; else memory)
//	PATCH  /sluice/rules/{kind}/{id}   change single fields (null unsets one)
//	DELETE /sluice/rules/{kind}/{id}   delete the Redis (or memory) fields; a static rule comes back
//	GET    /sluice/rules/{kind}/{id}/history            recorded changes, newest first
//	POST   /sluice/rules/{kind}/{id}/rollback?version=  write a recorded version back
//	GET    /sluice/rules/{kind}/{id}/verdicts           every instance's verdict, live or stopped
//	GET|PUT|PATCH|DELETE /sluice/bindings[/{route}[/history|/rollback]]  the same for route bindings
//	POST   /sluice/apply               a whole rule set, all or nothing (?dry_run=true: the verdicts only)
//	GET    /sluice/store               the store's Redis connection and counts
//	GET    /sluice/state               live state of the store and every handler package
//	POST   /sluice/{resource}/{id}/{action}  a registered action, e.g. breakers/order_cb/force_open
//	GET    /sluice/{resource}/...      a registered view, e.g. quota/{rule}/{key} (RegisterView)
//
// Writes take If-Match (412 on mismatch), ?dry_run=true (validate and show
// the diff, write nothing) and, for bindings, ?allow_missing=true.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.sluice",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	serve := func(w http.ResponseWriter, r *http.Request) error { return clipAPIError(serveAdmin(w, r)) }
	return append([]caddy.AdminRoute{{Pattern: "/sluice/", Handler: caddy.AdminHandlerFunc(serve)}}, uiRoutes()...)
}

// ruleView is a rule as the admin API shows it.
type ruleView struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Source  string `json:"source"`
	Version string `json:"version"`
	// Fields are the effective fields; Overlay the raw fields held in
	// Redis (or memory); Static tells a rule declared in the config.
	Fields  rulestore.Fields `json:"fields"`
	Overlay rulestore.Fields `json:"overlay,omitempty"`
	Static  bool             `json:"static"`
	// DeclaredVersion is the version of the rule as the config declares
	// it, the state a rollback to it (or a DELETE) goes back to.
	DeclaredVersion string `json:"declared_version,omitempty"`
	// Rejected is the value stored in Redis that this instance rejected,
	// if any: the rule above is the last good version, kept in force.
	Rejected *rulestore.RejectedView `json:"rejected,omitempty"`
}

func notFound(format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf(format, args...)}
}

func notAllowed(r *http.Request) error {
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed on %s", r.Method, r.URL.Path)}
}

// methodNotAllowed is notAllowed with the Allow header a 405 must carry.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow ...string) error {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed,
		Err: fmt.Errorf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))}
}

// runningStore is the rulestore app of the running config.
func runningStore() (*rulestore.App, error) {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		return nil, notFound("no rulestore in the running config")
	}
	return v.(*rulestore.App), nil
}

// serveAdmin answers /sluice/...: a store error becomes its status here
// (storeAPIError), once for every route.
func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	return storeAPIError(routeAdmin(w, r))
}

func routeAdmin(w http.ResponseWriter, r *http.Request) error {
	app, err := runningStore()
	if err != nil {
		return err
	}
	if ok, err := serveView(w, r, app); ok {
		return err
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/sluice/"), "/"), "/")
	if parts[0] == "bindings" { // /sluice/bindings/{route} = /sluice/rules/binding/{route}
		parts = append([]string{"rules", rulestore.Binding.String()}, parts[1:]...)
	}
	switch {
	case len(parts) == 1 && parts[0] == "apply":
		return serveApply(w, r, app)
	case len(parts) == 1 && (parts[0] == "store" || parts[0] == "state"):
		if r.Method != http.MethodGet {
			return methodNotAllowed(w, r, http.MethodGet)
		}
		if parts[0] == "store" {
			return writeJSON(w, app.Status())
		}
		return writeJSON(w, app.State())
	case len(parts) == 1 && parts[0] == "rules":
		if r.Method != http.MethodGet {
			return methodNotAllowed(w, r, http.MethodGet)
		}
		return writeJSON(w, index(app))
	case len(parts) == 4 && parts[0] == "rules":
		kind, ok := rulestore.ParseKind(parts[1])
		if !ok {
			return notFound("unknown rule kind %q", parts[1])
		}
		return serveHistory(w, r, app, kind, parts[2], parts[3])
	case len(parts) >= 2 && len(parts) <= 3 && parts[0] == "rules":
		return serveRules(w, r, app, parts[1:])
	case len(parts) == 3 && rulestore.LookupAction(parts[0]) != nil:
		return serveAction(w, r, app, rulestore.LookupAction(parts[0]), parts[1], parts[2])
	}
	return notFound("not found: %s", r.URL.Path)
}

// serveRules serves /sluice/rules/{kind} (GET: the kind's rules in force)
// and /sluice/rules/{kind}/{id} (GET, and the writes): parts are {kind}
// and, if given, {id}.
func serveRules(w http.ResponseWriter, r *http.Request, app *rulestore.App, parts []string) error {
	kind, ok := rulestore.ParseKind(parts[0])
	if !ok {
		return notFound("unknown rule kind %q", parts[0])
	}
	if len(parts) == 2 && (r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodDelete) {
		return serveWrite(w, r, app, kind, parts[1])
	}
	if r.Method != http.MethodGet && len(parts) == 1 {
		return methodNotAllowed(w, r, http.MethodGet)
	}
	if r.Method != http.MethodGet {
		return methodNotAllowed(w, r, http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete)
	}
	if len(parts) == 1 {
		out := []ruleView{}
		for _, rule := range app.Rules(kind) {
			out = append(out, viewOf(app, rule))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return writeJSON(w, out)
	}
	if rule := app.Lookup(kind, parts[1]); rule != nil {
		v := viewOf(app, rule)
		etag := v.Version
		if v.Rejected != nil { // a write replaces the stored value
			etag = v.Rejected.Version
		}
		w.Header().Set("ETag", rulestore.ETag(etag))
		return writeJSON(w, v)
	}
	if rej := app.Rejected(kind, parts[1]); rej != nil {
		return notFound("no %s rule %q in force: the stored version %s is rejected (%s) and no version was accepted before",
			kind, parts[1], rej.Version, rej.Reason)
	}
	return notFound("no %s rule %q", kind, parts[1])
}

// serveAction serves POST /sluice/{resource}/{id}/{action} with the action
// registered for resource.
func serveAction(w http.ResponseWriter, r *http.Request, app *rulestore.App, fn rulestore.ActionFunc, id, action string) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed(w, r, http.MethodPost)
	}
	if err := rulestore.ValidID(id); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	out, err := fn(r.Context(), app, id, action)
	if err != nil {
		return actionAPIError(err)
	}
	return writeJSON(w, out)
}

func viewOf(a *rulestore.App, r *rulestore.Rule) ruleView {
	v := ruleView{Kind: r.Kind.String(), ID: r.ID, Source: r.Source, Version: r.Version(), Fields: r.Fields,
		Overlay: r.Overlay, Rejected: a.Rejected(r.Kind, r.ID)}
	if st := a.Static(r.Kind, r.ID); st != nil {
		v.Static, v.DeclaredVersion = true, rulestore.Version(st.Fields)
	}
	return v
}

// kindIndex is one kind in GET /sluice/rules.
type kindIndex struct {
	Count int    `json:"count"`
	Path  string `json:"path"`
}

func index(a *rulestore.App) map[string]kindIndex {
	out := map[string]kindIndex{}
	for _, k := range rulestore.Kinds() {
		out[k.String()] = kindIndex{Count: a.Count(k), Path: "/sluice/rules/" + k.String()}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

var _ caddy.AdminRouter = adminAPI{}
