package rulestore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// typoCaddyfile declares rate_limit order_api and route order_route, with
// Redis; its site names them with typos (order_apj, order_rout).
const typoCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		rate_limit order_api {
			qps 0.001
			burst 1
			key_resolver global
		}
		binding order_route {
			rate_limit order_api
		}
	}
}
http://127.0.0.1:%d {
	route /a {
		ratelimit order_apj
		respond "a"
	}
	route /b {
		ratelimit {
			route order_rout
		}
		respond "b"
	}
}`

// Finding 7 of issue 27: with Redis configured, a reference to a rule the
// config does not declare, close to one it does, passed `caddy validate`
// silently and the route ran unlimited; the runtime warning had no
// suggestion. Now `caddy validate` warns with the suggestion, and so does
// the warning of a request that finds the rule missing.
func TestTypoWithRedisIsLoud(t *testing.T) {
	r := redistest.Start(t)
	port := testcaddy.FreePort(t)
	cfg := fmt.Sprintf(typoCaddyfile, r.URL(), port)

	file := filepath.Join(t.TempDir(), "Caddyfile")
	os.WriteFile(file, []byte(strings.ReplaceAll(cfg, "{{admin}}", fmt.Sprint(testcaddy.FreePort(t)))), 0o644)
	out, err := exec.Command(testcaddy.Binary(t), "validate", "--config", file, "--adapter", "caddyfile").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy validate failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"kind":"rate_limit","id":"order_apj","did_you_mean":"order_api"`,
		`"kind":"binding","id":"order_rout","did_you_mean":"order_route"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("caddy validate does not warn %s:\n%s", want, out)
		}
	}

	p := testcaddy.Start(t, cfg)
	testcaddy.Eventually(t, 10*time.Second, "first load from redis", func() bool {
		_, body := adminCall(t, p, "GET", "/sluice/store", "")
		return strings.Contains(body, `"last_resync"`)
	})
	for _, path := range []string{"/a", "/b"} {
		if resp, _ := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, path)); resp.StatusCode != 200 {
			t.Fatalf("%s: %d, want 200 (a missing rule passes by default)", path, resp.StatusCode)
		}
	}
	for _, want := range []string{
		`"rule not found; requests pass through until it arrives","kind":"rate_limit","id":"order_apj","did_you_mean":"order_api"`,
		`"rule not found; requests pass through until it arrives","kind":"binding","id":"order_rout","did_you_mean":"order_route"`,
	} {
		// The subprocess's log reaches us through a pipe: wait for the line.
		testcaddy.Eventually(t, 10*time.Second, "the runtime warning "+want, func() bool {
			return strings.Contains(p.Logs(), want)
		})
	}
}
