package caddyfile_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// Finding 6 of issue 13: `header >X-Served-Version {http.grayroute.version}`
// sent the literal placeholder when the rate limit answered first. The
// placeholders of a handler that did not decide are empty, never literal,
// whichever handler answered first.
func TestPlaceholdersOfHandlersThatDidNotDecideAreEmpty(t *testing.T) {
	port := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		rate_limit one {
			qps   1
			burst 1
		}
		circuit_breaker cb {
			failure_threshold 5
		}
		circuit_breaker forced {
			state force_open
		}
		gray canary {
			match_tag      X-Canary
			target_version v2
		}
	}
}
http://127.0.0.1:%d {
	header >X-Served-Version "{http.grayroute.version}"
	header >X-Breaker-State "{http.circuitbreaker.state}"
	header >X-Limit-Result "{http.ratelimit.result}"
	ratelimit /limited one
	circuitbreaker /forced forced
	circuitbreaker cb
	grayroute canary
	respond "ok"
}`, testcaddy.Options(t), port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	// Passes everything: grayroute decided, the breaker did not answer, the
	// rate limit did not run (path not /limited).
	resp, _ := testcaddy.Get(t, base+"/", "X-Canary: yes")
	expectHeaders(t, "pass", resp, http.StatusOK, map[string]string{
		"X-Served-Version": "v2", "X-Breaker-State": "", "X-Limit-Result": ""})

	// The first request spends the only token; the second is refused by the
	// rate limit before the breaker or grayroute run.
	resp, _ = testcaddy.Get(t, base+"/limited", "X-Canary: yes")
	expectHeaders(t, "first", resp, http.StatusOK, map[string]string{"X-Served-Version": "v2", "X-Limit-Result": "allowed"})
	resp, _ = testcaddy.Get(t, base+"/limited", "X-Canary: yes")
	expectHeaders(t, "refused", resp, http.StatusTooManyRequests, map[string]string{
		"X-Served-Version": "", "X-Breaker-State": "", "X-Limit-Result": "rate_limited"})

	// The breaker answers first (the rate limit does not run on /forced):
	// grayroute never ran, so its version is empty, not literal.
	resp, _ = testcaddy.Get(t, base+"/forced", "X-Canary: yes")
	expectHeaders(t, "breaker open", resp, http.StatusServiceUnavailable, map[string]string{
		"X-Served-Version": "", "X-Limit-Result": ""})
}

// expectHeaders checks status and headers; "" means empty or absent, and
// no header may carry a literal placeholder.
func expectHeaders(t *testing.T, what string, resp *http.Response, status int, want map[string]string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d", what, resp.StatusCode, status)
	}
	for name, v := range want {
		if got := resp.Header.Get(name); got != v {
			t.Errorf("%s: %s = %q, want %q", what, name, got, v)
		}
	}
	for name, vals := range resp.Header {
		for _, v := range vals {
			if strings.Contains(v, "{http.") {
				t.Errorf("%s: %s carries a literal placeholder: %q", what, name, v)
			}
		}
	}
}
