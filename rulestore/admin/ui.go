package admin

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

	"github.com/sluicegw/sluice/rulestore"
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

// serveStatusJSON serves the page's own JSON views.
func serveStatusJSON(w http.ResponseWriter, r *http.Request, name string) error {
	a, err := runningStore()
	if err != nil {
		return err
	}
	switch name {
	case "overview":
		return writeJSON(w, a.Overview())
	case "changes":
		changes, err := a.RecentChanges(r.Context())
		if err != nil {
			return apiError(http.StatusBadGateway, "reading the change log from redis: %v", err)
		}
		return writeJSON(w, changes)
	}
	fn := rulestore.LookupStatusQuery(name)
	if fn == nil {
		return notFound("no status page view %q", name)
	}
	out, err := fn(r.URL.Query())
	if err != nil {
		return actionAPIError(err)
	}
	return writeJSON(w, out)
}
