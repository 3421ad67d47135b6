package rulestore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves the rules in force on Caddy's admin endpoint, so it
// inherits the admin API's access controls:
//
//	GET    /sluice/rules/{kind}       every rule of a kind (rate_limit, circuit_breaker, gray, binding)
//	GET    /sluice/rules/{kind}/{id}  one rule
//	PUT    /sluice/rules/{kind}/{id}  validate, then write to Redis (hash, change log, publish)
//	DELETE /sluice/rules/{kind}/{id}  delete from Redis (hash, change log, publish)
//	GET    /sluice/store              the store's Redis connection and counts
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
	return []caddy.AdminRoute{{Pattern: "/sluice/", Handler: caddy.AdminHandlerFunc(serveAdmin)}}
}

// ruleView is a rule as the admin API shows it.
type ruleView struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Source string `json:"source"`
	Fields Fields `json:"fields"`
}

func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no rulestore in the running config")}
	}
	app := v.(*App)
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/sluice/"), "/"), "/")
	switch {
	case r.Method != http.MethodGet && !(len(parts) == 3 && parts[0] == "rules"):
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	case len(parts) == 1 && parts[0] == "store":
		return writeJSON(w, app.Status())
	case len(parts) >= 2 && parts[0] == "rules":
		kind, ok := ParseKind(parts[1])
		if !ok {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown rule kind %q", parts[1])}
		}
		if len(parts) == 2 {
			out := []ruleView{}
			for _, rule := range app.Rules(kind) {
				out = append(out, view(rule))
			}
			return writeJSON(w, out)
		}
		if len(parts) == 3 && r.Method != http.MethodGet {
			return app.serveWrite(w, r, kind, parts[2])
		}
		if len(parts) == 3 {
			if rule := app.Lookup(kind, parts[2]); rule != nil {
				return writeJSON(w, view(rule))
			}
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no %s rule %q", kind, parts[2])}
		}
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("not found: %s", r.URL.Path)}
}

func view(r *Rule) ruleView {
	return ruleView{Kind: r.Kind.String(), ID: r.ID, Source: r.Source, Fields: r.Fields}
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Status describes the store: where rules come from and how fresh they are.
type Status struct {
	Redis      bool           `json:"redis"`
	Connected  bool           `json:"connected"`
	LastResync *time.Time     `json:"last_resync,omitempty"`
	Resyncs    int64          `json:"resyncs"`
	Rejected   int64          `json:"rejected"`
	Rules      map[string]int `json:"rules"`
}

// Status reports the store's state.
func (a *App) Status() Status {
	st := Status{Redis: a.source != nil, Rules: map[string]int{}}
	for _, k := range Kinds() {
		st.Rules[k.String()] = len(a.Rules(k))
	}
	if a.source != nil {
		st.Connected = a.source.status.connected.Load()
		st.Resyncs = a.source.status.resyncs.Load()
		st.Rejected = a.source.status.rejected.Load()
		if ns := a.source.status.lastResync.Load(); ns != 0 {
			t := time.Unix(0, ns).UTC()
			st.LastResync = &t
		}
	}
	return st
}

var _ caddy.AdminRouter = adminAPI{}
