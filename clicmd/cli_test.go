package clicmd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// sluice runs `caddy sluice args...` against the admin API of p and
// returns stdout, stderr and whether it exited 0.
func sluice(t *testing.T, p *testcaddy.Process, args ...string) (string, string, bool) {
	t.Helper()
	args = append([]string{"sluice"}, args...)
	args = append(args, "--address", fmt.Sprintf("localhost:%d", p.AdminPort))
	cmd := exec.Command(testcaddy.Binary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func mustSluice(t *testing.T, p *testcaddy.Process, args ...string) string {
	t.Helper()
	out, errOut, ok := sluice(t, p, args...)
	if !ok {
		t.Fatalf("caddy sluice %s failed: %s%s", strings.Join(args, " "), out, errOut)
	}
	return out
}

const cliCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		%s
		circuit_breaker cli_cb {
			failure_threshold 5
		}
		binding cli_route {
			circuit_breaker cli_cb
		}
	}
}
http://127.0.0.1:%d {
	ratelimit {
		route cli_route
	}
	circuitbreaker cli_cb
	respond "ok"
}
`

// The CLI against a running server without Redis: every command, and
// errors that say what is wrong.
func TestCLIRoundTrip(t *testing.T) {
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "", port))
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)

	out := mustSluice(t, p, "rules", "set", "rate_limit", "cli_rl", "limit_type=token_bucket", "qps=0.001", "burst=1", "key_resolver=ip")
	if !strings.Contains(out, `"stored": "memory"`) || !strings.Contains(out, "no redis configured") {
		t.Fatalf("set: %s", out)
	}
	mustSluice(t, p, "bindings", "set", "cli_route", "rate_limit=cli_rl")
	// The route now has a limit of one request.
	codes := []int{}
	for range 2 {
		resp, _ := testcaddy.Get(t, site)
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 429]" {
		t.Fatalf("after CLI writes: %v", codes)
	}

	var rule struct {
		Source string            `json:"source"`
		Fields map[string]string `json:"fields"`
	}
	json.Unmarshal([]byte(mustSluice(t, p, "rules", "get", "rate_limit", "cli_rl")), &rule)
	if rule.Source != "memory" || rule.Fields["qps"] != "0.001" {
		t.Fatalf("get: %+v", rule)
	}
	if out := mustSluice(t, p, "rules", "list", "rate_limit"); !strings.Contains(out, `"id": "cli_rl"`) {
		t.Fatalf("list: %s", out)
	}
	if out := mustSluice(t, p, "bindings", "get", "cli_route"); !strings.Contains(out, `"rate_limit": "cli_rl"`) {
		t.Fatalf("bindings get: %s", out)
	}
	if out := mustSluice(t, p, "bindings", "list"); !strings.Contains(out, `"id": "cli_route"`) {
		t.Fatalf("bindings list: %s", out)
	}
	// --json, and from stdin.
	mustSluice(t, p, "rules", "set", "gray", "cli_gray", "--json", `{"target_version": "v2", "weight": 10}`)
	cmd := exec.Command(testcaddy.Binary(t), "sluice", "rules", "set", "gray", "cli_gray2", "--json", "-",
		"--address", fmt.Sprintf("localhost:%d", p.AdminPort))
	cmd.Stdin = strings.NewReader(`{"target_version": "v3", "weight": 5}`)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("set --json -: %v %s", err, b)
	}
	if out := mustSluice(t, p, "rules", "list", "gray"); !strings.Contains(out, "cli_gray2") {
		t.Fatalf("gray list: %s", out)
	}

	// State, in whole and by section.
	var st struct {
		Ratelimit struct {
			Rules []struct {
				Rule     string           `json:"rule"`
				Requests map[string]int64 `json:"requests"`
			} `json:"rules"`
		} `json:"ratelimit"`
	}
	if err := json.Unmarshal([]byte(mustSluice(t, p, "state")), &st); err != nil || len(st.Ratelimit.Rules) != 1 ||
		st.Ratelimit.Rules[0].Rule != "cli_rl" || st.Ratelimit.Rules[0].Requests["rejected"] != 1 {
		t.Fatalf("state: %+v %v", st, err)
	}
	if out := mustSluice(t, p, "state", "circuitbreaker"); !strings.Contains(out, `"rule": "cli_cb"`) {
		t.Fatalf("state circuitbreaker: %s", out)
	}
	if out := mustSluice(t, p, "store"); !strings.Contains(out, `"redis": false`) {
		t.Fatalf("store: %s", out)
	}

	// Breaker override: the limit passes the request on, the breaker refuses it.
	mustSluice(t, p, "rules", "delete", "rate_limit", "cli_rl")
	if out := mustSluice(t, p, "breaker", "cli_cb", "force_open"); !strings.Contains(out, `"override": "force_open"`) {
		t.Fatalf("breaker force_open: %s", out)
	}
	if resp, _ := testcaddy.Get(t, site); resp.StatusCode != 503 {
		t.Fatalf("forced open: %d", resp.StatusCode)
	}
	mustSluice(t, p, "breaker", "cli_cb", "reset")
	testcaddy.Eventually(t, 5*time.Second, "breaker reset", func() bool {
		resp, _ := testcaddy.Get(t, site)
		return resp.StatusCode == 200
	})
	mustSluice(t, p, "bindings", "delete", "cli_route")

	// Errors: the admin API's reason, and a non-zero exit.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rules", "set", "rate_limit", "x", "qps=lots"}, "field qps"},
		{[]string{"rules", "set", "rate_limit", "x", "qps"}, "want field=value"},
		{[]string{"rules", "get", "rate_limit", "nope"}, "404"},
		{[]string{"rules", "list", "nonsense"}, "unknown rule kind"},
		{[]string{"breaker", "cli_cb", "explode"}, "unknown breaker action"},
		{[]string{"state", "nope"}, "no state section"},
	} {
		out, errOut, ok := sluice(t, p, c.args...)
		if ok || !strings.Contains(errOut, c.want) {
			t.Errorf("caddy sluice %s: ok=%v out=%q err=%q, want failure with %q", strings.Join(c.args, " "), ok, out, errOut, c.want)
		}
	}
	if _, errOut, ok := sluice(t, &testcaddy.Process{AdminPort: testcaddy.FreePort(t)}, "store"); ok || !strings.Contains(errOut, "connection refused") {
		t.Errorf("no server: ok=%v %s", ok, errOut)
	}
}

// With Redis, a rule set through one instance's admin API (by the CLI)
// reaches a second instance, and an invalid one changes nothing.
func TestCLIWritePropagatesToSecondInstance(t *testing.T) {
	r := redistest.Start(t)
	redisLine := "redis " + r.URL()
	portA, portB := testcaddy.FreePort(t), testcaddy.FreePort(t)
	a := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, redisLine, portA))
	b := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, redisLine, portB))
	for _, p := range []*testcaddy.Process{a, b} {
		testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
			out, _, ok := sluice(t, p, "store")
			return ok && strings.Contains(out, `"connected": true`)
		})
	}

	out := mustSluice(t, a, "rules", "set", "rate_limit", "shared", "limit_type=token_bucket", "qps=0.001", "burst=2", "key_resolver=ip")
	if !strings.Contains(out, `"stored": "redis"`) {
		t.Fatalf("set: %s", out)
	}
	mustSluice(t, a, "bindings", "set", "cli_route", "rate_limit=shared")
	var version struct {
		Version string `json:"version"`
		Source  string `json:"source"`
	}
	json.Unmarshal([]byte(out), &version)
	testcaddy.Eventually(t, 10*time.Second, "rule and binding on the second instance", func() bool {
		out, _, ok := sluice(t, b, "rules", "get", "rate_limit", "shared")
		_, _, okB := sluice(t, b, "bindings", "get", "cli_route")
		return ok && okB && strings.Contains(out, `"version": "`+version.Version+`"`) && strings.Contains(out, `"source": "redis"`)
	})
	// Both instances' state names the same version, from Redis.
	for _, p := range []*testcaddy.Process{a, b} {
		var st struct {
			Writes   string `json:"writes"`
			Versions map[string]map[string]struct {
				Version, Source string
			} `json:"versions"`
		}
		json.Unmarshal([]byte(mustSluice(t, p, "state", "rulestore")), &st)
		if v := st.Versions["rate_limit"]["shared"]; st.Writes != "redis" || v.Version != version.Version || v.Source != "redis" {
			t.Fatalf("state rulestore: %+v", st)
		}
	}
	// It is in force there: two requests, then 429.
	codes := []int{}
	for range 3 {
		resp, _ := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d/", portB))
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Fatalf("second instance: %v", codes)
	}

	// Rejected: nothing changes, anywhere.
	if _, errOut, ok := sluice(t, a, "rules", "set", "rate_limit", "shared", "qps=0"); ok || !strings.Contains(errOut, "qps") {
		t.Fatalf("invalid set: ok=%v %s", ok, errOut)
	}
	if out := mustSluice(t, b, "rules", "get", "rate_limit", "shared"); !strings.Contains(out, `"version": "`+version.Version+`"`) {
		t.Fatalf("after an invalid write: %s", out)
	}

	mustSluice(t, a, "rules", "delete", "rate_limit", "shared")
	testcaddy.Eventually(t, 10*time.Second, "delete reaches the second instance", func() bool {
		_, errOut, ok := sluice(t, b, "rules", "get", "rate_limit", "shared")
		return !ok && strings.Contains(errOut, "404")
	})
}
