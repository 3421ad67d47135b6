package ratelimit_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// softRules: soft refuses nothing: over its 2 it tags (tagged) or, on
// the other route, demotes (demoted); cap is an adaptive in-flight limit
// whose class a demoted request takes.
const softRules = `	rulestore {
		rate_limit soft {
			qps 0.0001
			burst 2
			key_resolver global
			over_limit tag
		}
		rate_limit demoting {
			qps 0.0001
			burst 2
			key_resolver global
			over_limit demote
		}
		rate_limit cap {
			max_concurrent adaptive
			key_resolver global
		}
	}`

// What the upstream sees: the mark and the last ratelimit handler's
// placeholders (demoted: the adaptive limit's, with its class).
const softEcho = "\trespond \"{http.request.header.X-RateLimit-Over-Limit}|{http.ratelimit.over_limit}|{http.ratelimit.result}|{http.ratelimit.priority}\""

// over_limit tag lets the requests over the limit through, marked for the
// upstream and counted as tagged; demote also makes them sheddable under
// the adaptive limit after it. Neither is counted allowed or rejected.
func TestOverLimitTagsAndDemotes(t *testing.T) {
	s := caddyfile(t, softRules, "\tratelimit soft\n"+strings.TrimSuffix(softEcho, "|{http.ratelimit.priority}\"")+"\"", "\tratelimit demoting\n\tratelimit cap\n"+softEcho)
	testcaddy.Run(t, s.cfg)
	want := []struct{ url, body string }{
		{s.urls[0], "||allowed"}, {s.urls[0], "||allowed"}, {s.urls[0], "soft|soft|tagged"}, {s.urls[0], "soft|soft|tagged"},
		{s.urls[1], "||allowed|normal"}, {s.urls[1], "||allowed|normal"}, {s.urls[1], "demoting||allowed|sheddable"},
	}
	for i, w := range want {
		resp, body := testcaddy.Get(t, w.url)
		if resp.StatusCode != http.StatusOK || body != w.body {
			t.Fatalf("request %d: %d %q, want 200 %q", i+1, resp.StatusCode, body, w.body)
		}
	}
	_, m := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/metrics", s.adminPort))
	for series, n := range map[string]float64{
		`sluice_ratelimit_requests_total{result="allowed",rule="soft"}`:      2,
		`sluice_ratelimit_requests_total{result="tagged",rule="soft"}`:       2,
		`sluice_ratelimit_requests_total{result="rejected",rule="soft"}`:     0,
		`sluice_ratelimit_requests_total{result="demoted",rule="demoting"}`:  1,
		`sluice_ratelimit_requests_total{result="tagged",rule="demoting"}`:   0,
		`sluice_ratelimit_requests_total{result="rejected",rule="demoting"}`: 0,
	} {
		if got := metricValue(m, series); got != n {
			t.Errorf("%s = %v, want %v", series, got, n)
		}
	}
	// The state endpoint (and the status page, which reads it) counts them
	// apart too.
	_, state := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/state", s.adminPort))
	for _, want := range []string{`"allowed":2`, `"tagged":2`, `"demoted":1`} {
		if !strings.Contains(state, want) {
			t.Errorf("/sluice/state has no %s: %s", want, state)
		}
	}
}

// A gray rule that matches the mark sends the traffic over a limit to a
// best-effort version: the first two requests reach v1, the tagged ones
// best_effort.
func TestOverLimitMarkRoutesToABestEffortVersion(t *testing.T) {
	global := strings.TrimSuffix(softRules, "\n\t}") + `
		gray over {
			match_tag      X-RateLimit-Over-Limit
			target_version best_effort
		}
	}`
	s := caddyfile(t, global, `	ratelimit soft
	grayroute over
	@best vars gray_version best_effort
	respond @best "best_effort"
	respond "v1"`)
	testcaddy.Run(t, s.cfg)
	for i, want := range []string{"v1", "v1", "best_effort", "best_effort"} {
		resp, body := testcaddy.Get(t, s.urls[0])
		if resp.StatusCode != http.StatusOK || body != want {
			t.Fatalf("request %d: %d %q, want 200 %q", i+1, resp.StatusCode, body, want)
		}
	}
}
