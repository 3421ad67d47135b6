package ratelimit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// serveHolding serves a request holding decision d's in-flight slot of
// eng through the pipeline's serve step, as a list of one rule that
// admitted it (TestSlotReleasedOnPanic).
func serveHolding(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, eng Engine, d Decision) error {
	ts := []taken{{m: member{rule: new(Rule)}, eng: eng, d: d, decided: true, admitted: true}}
	return serve(w, r, next, ts, nil, nil)
}
