package ratelimit_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

func TestShadowModeCountsButNeverRejects(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver global
		shadow true
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 200})
	resp, _ := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("shadow: %d remaining=%q retry-after=%q, want 200 with remaining 0 and no Retry-After",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"))
	}
	id, _, _ := strings.Cut(strings.Trim(resp.Header.Get("RateLimit-Policy"), `"`), `"`)
	m := metrics(t, s.adminPort)
	if v := metricValue(m, `sluice_ratelimit_requests_total{result="shadow_rejected",rule="`+id+`"}`); v != 3 {
		t.Errorf("shadow_rejected = %v, want 3\n%s", v, grep(m, "sluice_"))
	}
	if v := metricValue(m, `sluice_ratelimit_requests_total{result="allowed",rule="`+id+`"}`); v != 1 {
		t.Errorf("allowed = %v, want 1", v)
	}
	if v := metricValue(m, `sluice_ratelimit_keys{rule="`+id+`"}`); v != 1 {
		t.Errorf("keys = %v, want 1", v)
	}
}

func TestHandleErrorsMode(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver global
		handle_errors true
		status 503
	}
	respond "ok"
	handle_errors {
		respond "limited by {http.ratelimit.rule}, retry in {http.ratelimit.retry_after}s" {err.status_code}
	}`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200})
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != 503 || !regexp.MustCompile(`^limited by inline:[0-9a-f]+, retry in \d+s$`).MatchString(body) {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

func TestCustomBody(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver global
		body "slow down, {http.ratelimit.retry_after}s"
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200})
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != 429 || !regexp.MustCompile(`^slow down, \d+s$`).MatchString(body) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("got %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

func TestReloadKeepsCounters(t *testing.T) {
	site := func(text string) string {
		return fmt.Sprintf(`
	ratelimit {
		qps 0.01
		burst 2
		key_resolver global
	}
	respond %q`, text)
	}
	s := caddyfile(t, "", site("v1"))
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 429})
	// Same rule, other config: the quota is still spent.
	s2 := strings.Replace(s.cfg, `"v1"`, `"v2"`, 1)
	testcaddy.Reload(t, s2)
	resp, body := testcaddy.Get(t, s.urls[0])
	if resp.StatusCode != 429 {
		t.Fatalf("after reload: %d %q, want 429 (counters kept)", resp.StatusCode, body)
	}
	// A rule store rule keeps its counters across a reload too, even when
	// its numbers change.
	s3 := caddyfile(t, `
	rulestore {
		rate_limit api {
			qps 0.01
			burst 2
			key_resolver global
		}
	}`, "ratelimit api\nrespond \"ok\"")
	testcaddy.Reload(t, s3.cfg)
	expect(t, s3.urls[0], []int{200, 200, 429})
	// burst 2 -> 3: the spent tokens stay spent, the new limit shows.
	testcaddy.Reload(t, strings.Replace(s3.cfg, "burst 2", "burst 3", 1))
	resp, _ = testcaddy.Get(t, s3.urls[0])
	if resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Limit") != "3" {
		t.Fatalf("after raising burst: %d limit %q, want 429 with limit 3", resp.StatusCode, resp.Header.Get("X-RateLimit-Limit"))
	}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		body string
		line int
		want string
	}{
		{"ratelimit {\n\t\tqps abc\n\t}", 9, "qps"},
		{"ratelimit {\n\t\tqps 10\n\t\tscope cluster\n\t}", 10, "configure redis in the global rulestore block"},
		{"ratelimit {\n\t\tqps 10\n\t\tscope cluster\n\t\tlease_size 20\n\t}", 11, "lease_size"},
		{"ratelimit {\n\t\tqps 10\n\t\tflavour x\n\t}", 10, "unknown field"},
		{"ratelimit {\n\t\tqps 10\n\t\tburst 2\n\t\trequested_tokens 5\n\t}", 11, "requested_tokens"},
		{"ratelimit {\n\t\trule a\n\t\tqps 10\n\t}", 10, "cannot be mixed"},
		{"ratelimit {\n\t\tqps 10\n\t\tqps 20\n\t}", 10, "given twice"},
		{"ratelimit", 8, "give a rule id"},
		{"ratelimit bad/id", 8, "not allowed"},
	}
	for _, c := range cases {
		s := caddyfile(t, "", "\t"+c.body+"\n\trespond \"ok\"")
		err := testcaddy.Validate(s.cfg)
		if err == nil || !strings.Contains(err.Error(), "Caddyfile:"+strconv.Itoa(c.line)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want Caddyfile:%d and %q", c.body, err, c.line, c.want)
		}
	}
	// A rule id that does not exist, with no Redis to bring it: a typo.
	s := caddyfile(t, "", "\tratelimit nosuch\n\trespond \"ok\"")
	if err := testcaddy.Validate(s.cfg); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("missing rule: %v", err)
	}
}

func metrics(t *testing.T, adminPort int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", adminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue returns the value of the first sample line starting with prefix.
func metricValue(m, prefix string) float64 {
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return -1
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

var _ = http.StatusOK

// Many distinct keys through real Caddy: the rule tracks at most max_keys.
func TestMaxKeysInCaddy(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		qps 0.01
		burst 1
		key_resolver userId
		max_keys 200
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	for i := 0; i < 1000; i++ {
		if got := status(t, s.urls[0], fmt.Sprintf("X-User-Id: u%d", i)); got != 200 {
			t.Fatalf("user %d: %d", i, got)
		}
	}
	// u999 is recent: still tracked, its bucket spent. u0 was evicted long
	// ago: it starts afresh (one token spent is within what eviction
	// forgives; see TestEvictedSpentKeyStaysRefusedInCaddy for a spent
	// quota).
	expect(t, s.urls[0], []int{429}, "X-User-Id: u999")
	expect(t, s.urls[0], []int{200}, "X-User-Id: u0")
	resp, _ := testcaddy.Get(t, s.urls[0], "X-User-Id: u999")
	id, _, _ := strings.Cut(strings.Trim(resp.Header.Get("RateLimit-Policy"), `"`), `"`)
	if v := metricValue(metrics(t, s.adminPort), `sluice_ratelimit_keys{rule="`+id+`"}`); v < 100 || v > 200 {
		t.Fatalf("keys tracked %v, want at most max_keys 200 (and close to it)", v)
	}
}
