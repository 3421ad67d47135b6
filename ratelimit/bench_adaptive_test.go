package ratelimit

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkServeAdaptive is the admitted path of max_concurrent adaptive
// through the handler in front of Caddy's respond: take a slot (nobody
// waits, a slot is free), decide the rate, serve, give the slot back with
// the latency. The limit is fixed at 1000 so no request waits.
func BenchmarkServeAdaptive(b *testing.B) {
	respond := caddyhttp.StaticResponse{Body: "ok"}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return respond.ServeHTTP(w, r, nil)
	})
	f := rulestore.Fields{"qps": "1e9", "key_resolver": "userId", "headers": "off", "max_concurrent": "adaptive",
		"min_limit": "1000", "max_limit": "1000", "initial_limit": "1000"}
	r, err := ParseRule(InlineID(f), f)
	if err != nil {
		b.Fatal(err)
	}
	lim := newLimiter(r.ID, nil)
	defer lim.Destruct()
	benchHandlerParallel(b, &Handler{inline: r, fixed: lim}, next, runtime.GOMAXPROCS(0), 10_000)
}
