package admin

import (
	"net/http"
	"strings"

	"github.com/sluicegw/sluice/rulestore"
)

// serveView answers a request for a view a handler package registered
// (rulestore.RegisterView), or reports false when the path names none.
func serveView(w http.ResponseWriter, r *http.Request, a *rulestore.App) (bool, error) {
	escaped := strings.TrimPrefix(r.URL.EscapedPath(), "/sluice/")
	resource, rest, _ := strings.Cut(escaped, "/")
	fn := rulestore.LookupView(resource)
	if fn == nil {
		return false, nil
	}
	if r.Method != http.MethodGet {
		return true, methodNotAllowed(w, r, http.MethodGet)
	}
	if r.URL.RawQuery != "" {
		rest += "?" + r.URL.RawQuery
	}
	out, err := fn(r.Context(), a, rest)
	if err != nil {
		return true, actionAPIError(err)
	}
	return true, writeJSON(w, out)
}
