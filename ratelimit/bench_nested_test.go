package ratelimit

import (
	"encoding/json"
	"net/http"
	"runtime"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkServeHTTPNested is the handler on a three-level tree (user key
// → team → org, each guaranteed a share, none refusing) beside a single
// local rule as BenchmarkServeHTTP's rule=store, over 10,000 users: the
// tree's decision should cost at most twice the single rule's CPU. Every
// user is in one team of one org, so every spend takes the same root
// stripe: the worst case for the tree's lock.
func BenchmarkServeHTTPNested(b *testing.B) {
	respond := caddyhttp.StaticResponse{Body: "ok"}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return respond.ServeHTTP(w, r, nil)
	})
	hs := provisionedRules(b, map[string]any{
		"single": rulestore.Fields{"qps": "1e9", "key_resolver": "userId"},
		"org":    rulestore.Fields{"qps": "1e9", "key_resolver": "global"},
		"team":   rulestore.Fields{"qps": "1e9", "key_resolver": "global", "parent": "org", "parent_key": "global", "guarantee": "50"},
		"user":   rulestore.Fields{"qps": "1e9", "key_resolver": "userId", "parent": "team", "parent_key": "global", "guarantee": "1"},
	}, "single", "user")
	for i, name := range []string{"levels=1", "levels=3"} {
		b.Run(name, func(b *testing.B) {
			benchHandlerParallel(b, hs[i], next, runtime.GOMAXPROCS(0), 10_000)
		})
	}
}

// provisionedRules provisions `ratelimit <id>` for each of ids in a
// running in-process Caddy whose rule store declares rules.
func provisionedRules(t testing.TB, rules map[string]any, ids ...string) []*Handler {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps":  map[string]any{"rulestore": map[string]any{"rate_limit": rules}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testcaddy.RunJSON(t, cfg)
	hs := make([]*Handler, len(ids))
	for i, id := range ids {
		h := &Handler{Rule: id}
		if err := h.Provision(caddy.ActiveContext()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Cleanup() })
		hs[i] = h
	}
	return hs
}
