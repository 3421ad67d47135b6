package caddyfile_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// on_missing_rule refuse closes a route whose rule does not exist (503),
// in each of the three handlers, while the default lets it pass; once the
// rule exists the refusing route serves again.
func TestOnMissingRuleRefuseClosesTheRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Caddy")
	}
	r := redistest.Start(t)
	admin := testcaddy.FreePort(t)
	port := testcaddy.FreePort(t)
	cfg := fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	storage file_system %s
	rulestore {
		redis %s
		rate_limit present {
			qps 1000
		}
	}
}
http://localhost:%d {
	handle /rl-refuse {
		ratelimit {
			rule later_rl
			on_missing_rule refuse
		}
		respond "rl"
	}
	handle /rl-pass {
		ratelimit {
			rule later_rl
		}
		respond "rl-pass"
	}
	handle /cb-refuse {
		circuitbreaker {
			rule later_cb
			on_missing_rule refuse
		}
		respond "cb"
	}
	handle /gray-refuse {
		grayroute {
			rule later_gray
			on_missing_rule refuse
		}
		respond "gray"
	}
	handle /route-refuse {
		ratelimit {
			route later_route
			on_missing_rule refuse
		}
		respond "route"
	}
}
`, admin, t.TempDir(), r.URL(), port)
	testcaddy.Run(t, cfg)
	url := func(p string) string { return fmt.Sprintf("http://localhost:%d%s", port, p) }

	for _, p := range []string{"/rl-refuse", "/cb-refuse", "/gray-refuse", "/route-refuse"} {
		if resp, body := testcaddy.Get(t, url(p)); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s with its rule missing: %d %q, want 503", p, resp.StatusCode, body)
		}
	}
	if resp, body := testcaddy.Get(t, url("/rl-pass")); resp.StatusCode != 200 || body != "rl-pass" {
		t.Errorf("/rl-pass (default on_missing_rule): %d %q, want 200", resp.StatusCode, body)
	}

	// The rules arrive in Redis.
	c := r.Client()
	redistest.Push(t, c, "rate_limit:rule:later_rl", "gateway:rules:rate_limit", "later_rl", "qps", "1000")
	redistest.Push(t, c, "circuit_breaker:rule:later_cb", "gateway:rules:circuit_breaker", "later_cb", "failure_threshold", "5")
	redistest.Push(t, c, "gray:rule:later_gray", "gateway:rules:gray", "later_gray",
		"match_tag", "X-Canary", "match_value", "true", "target_version", "v2")
	redistest.Push(t, c, "gateway:binding:later_route", "gateway:rules:binding", "later_route", "rate_limit", "present")
	for _, c := range []struct{ path, want string }{
		{"/rl-refuse", "rl"}, {"/cb-refuse", "cb"}, {"/gray-refuse", "gray"}, {"/route-refuse", "route"},
	} {
		testcaddy.Eventually(t, 10*time.Second, c.path+" served once its rule exists", func() bool {
			resp, body := testcaddy.Get(t, url(c.path))
			return resp.StatusCode == 200 && body == c.want
		})
	}
}

// A bad value is a validate error naming the handler and the choices.
func TestOnMissingRuleBadValue(t *testing.T) {
	err := testcaddy.Validate("http://localhost:1 {\n\tratelimit {\n\t\trule r\n\t\ton_missing_rule close\n\t}\n\trespond ok\n}\n")
	if err == nil || !strings.Contains(err.Error(), "want pass or refuse") {
		t.Fatalf("want an error naming pass or refuse, got %v", err)
	}
}
