// Package circuitbreaker is Sluice's http.handlers.circuitbreaker module.
package circuitbreaker

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(new(Handler))
}

// Handler is the circuitbreaker HTTP handler.
type Handler struct{}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.circuitbreaker",
		New: func() caddy.Module { return new(Handler) },
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// ParseCaddyfile parses the circuitbreaker directive.
func ParseCaddyfile(hp httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h := new(Handler)
	for hp.Next() {
		for hp.NextBlock(0) {
		}
	}
	return h, nil
}

// IsOpen reports whether the breaker of rule ruleID is open (or forced open)
// for the given key: key is the breaker key's resolved value for keyed rules
// (e.g. "v2" for `key {http.vars.gray_version}`) and is ignored for rules
// without a key. grayroute's fallback_on_open calls it.
func IsOpen(ruleID, key string) bool { return false }
