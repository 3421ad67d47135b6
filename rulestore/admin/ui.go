package rulestore

// The status page: GET /sluice/ui/ on Caddy's admin listener. Static files
// embedded in the binary; the page polls the admin API's JSON endpoints
// (/sluice/state, /sluice/rules/...) from the same origin, so it has
// exactly the admin API's exposure and origin checks, and adds one small
// endpoint of its own:
//
//	GET /sluice/ui/              the page (index.html, app.js, style.css)
//	GET /sluice/ui/overview.json live instances, propagation-delay totals, skipped keys
//	GET /sluice/ui/changes.json  the newest rule changes of the fleet (who, what, diff)
//	GET /sluice/ui/{name}.json   a handler package's view (RegisterStatusQuery),
//	                             e.g. breaker_keys.json?rule=ID&q=TEXT&offset=N
//
// The sluice_status HTTP handler (status_handler.go) serves the same page
// and read API on a site of its own.

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

//go:embed ui
var uiFiles embed.FS

// uiRoutes are the status page's admin routes; Routes adds them.
func uiRoutes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/sluice/ui/", Handler: caddy.AdminHandlerFunc(serveUI)}}
}

// uiCSP keeps the page to its own files and its own origin: no inline
// script, no third-party fetches, no framing.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func serveUI(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return notAllowed(r)
	}
	name := strings.TrimPrefix(r.URL.Path, "/sluice/ui/")
	if strings.HasSuffix(name, ".json") {
		return serveStatusJSON(w, r, strings.TrimSuffix(name, ".json"))
	}
	if name == "" {
		name = "index.html"
	}
	body, err := fs.ReadFile(uiFiles, "ui/"+name)
	if err != nil || strings.Contains(name, "/") {
		return notFound("no status page file %q", name)
	}
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	// The page's GET fetches carry their origin only in the Referer, which
	// Caddy's admin origin check reads: keep it for same-origin requests.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", uiContentType(name))
	if r.Method == http.MethodGet {
		_, err = w.Write(body)
	}
	return err
}

func uiContentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".html"):
		return "text/html; charset=utf-8"
	case strings.HasSuffix(name, ".js"):
		return "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		return "text/css; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// Overview is GET /sluice/ui/overview.json: what the overview shows beyond
// /sluice/state.
type Overview struct {
	// LiveInstances counts the Caddy instances following the same Redis and
	// prefix, from their heartbeats (1 without Redis).
	LiveInstances int `json:"live_instances"`
	// Propagation holds the totals of
	// sluice_rulestore_propagation_delay_seconds; the page shows the mean
	// delay of the changes applied between two polls.
	Propagation PropagationTotals `json:"propagation"`
	// Skipped lists the rule keys the last resync ignored because their
	// id is not valid (at most 100).
	Skipped []InvalidRule `json:"skipped"`
}

// PropagationTotals are a histogram's count and sum since the process started.
type PropagationTotals struct {
	// Count counts the rule changes whose propagation was measured.
	Count uint64 `json:"count"`
	// SumSeconds adds up their propagation times, in seconds.
	SumSeconds float64 `json:"sum_seconds"`
}

func serveOverview(w http.ResponseWriter, a *App) error {
	out := Overview{LiveInstances: a.LiveInstances(), Skipped: []InvalidRule{}}
	out.Propagation.Count, out.Propagation.SumSeconds = propagationDelay.totals()
	if a.source != nil {
		out.Skipped = append(out.Skipped, a.source.feedback.skipped.list()...)
	}
	return writeJSON(w, out)
}

// serveStatusJSON serves the page's own JSON views.
func serveStatusJSON(w http.ResponseWriter, r *http.Request, name string) error {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		return notFound("no rulestore in the running config")
	}
	a := v.(*App)
	switch name {
	case "overview":
		return serveOverview(w, a)
	case "changes":
		changes, err := a.RecentChanges(r.Context())
		if err != nil {
			return apiError(http.StatusBadGateway, "reading the change log from redis: %v", err)
		}
		return writeJSON(w, changes)
	}
	fn := statusQuery(name)
	if fn == nil {
		return notFound("no status page view %q", name)
	}
	out, err := fn(r.URL.Query())
	if err != nil {
		return actionAPIError(err)
	}
	return writeJSON(w, out)
}
