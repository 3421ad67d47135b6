package rulestore

// The status page: GET /sluice/ui/ on Caddy's admin listener. Static files
// embedded in the binary; the page polls the admin API's JSON endpoints
// (/sluice/state, /sluice/rules/...) from the same origin, so it has
// exactly the admin API's exposure and origin checks, and adds one small
// endpoint of its own:
//
//	GET /sluice/ui/              the page (index.html, app.js, style.css)
//	GET /sluice/ui/overview.json live instances and the propagation-delay totals

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
	if name == "overview.json" {
		return serveOverview(w)
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
}

// PropagationTotals are a histogram's count and sum since the process started.
type PropagationTotals struct {
	Count      uint64  `json:"count"`
	SumSeconds float64 `json:"sum_seconds"`
}

func serveOverview(w http.ResponseWriter) error {
	v, err := caddy.ActiveContext().AppIfConfigured("rulestore")
	if err != nil {
		return notFound("no rulestore in the running config")
	}
	out := Overview{LiveInstances: v.(*App).LiveInstances()}
	out.Propagation.Count, out.Propagation.SumSeconds = propagationDelay.totals()
	return writeJSON(w, out)
}
