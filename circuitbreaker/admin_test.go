package circuitbreaker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// adminCall sends a request to the admin API and returns status and body.
func adminCall(t *testing.T, admin, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, admin+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type breakerView struct {
	State               string  `json:"state"`
	OpenForSeconds      float64 `json:"open_for_seconds"`
	ConsecutiveFailures int64   `json:"consecutive_failures"`
	Window              *struct {
		Calls, Failures int64
	} `json:"window"`
}

type ruleView struct {
	Rule     string           `json:"rule"`
	RuleMode string           `json:"rule_state"`
	Override string           `json:"override"`
	Breaker  breakerView      `json:"breaker"`
	Rejected int64            `json:"rejected"`
	Calls    map[string]int64 `json:"calls"`
}

func breakerState(t *testing.T, admin, id string) ruleView {
	t.Helper()
	code, body := adminCall(t, admin, "GET", "/sluice/state")
	if code != 200 {
		t.Fatalf("GET /sluice/state: %d %s", code, body)
	}
	var st struct {
		Circuitbreaker struct{ Rules []ruleView } `json:"circuitbreaker"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, r := range st.Circuitbreaker.Rules {
		if r.Rule == id {
			return r
		}
	}
	t.Fatalf("rule %s not in state: %s", id, body)
	return ruleView{}
}

// The state endpoint shows a breaker opened by a failing upstream, and the
// admin API overrides it on this instance until reset.
func TestStateAndOverrides(t *testing.T) {
	u := newUpstream(t)
	port, adminPort := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		circuit_breaker ops {
			failure_threshold 3
			open_duration 1h
			window 20
			failure_rate 90
			min_requests 10
		}
	}
}
http://127.0.0.1:%d {
	circuitbreaker ops
	reverse_proxy %s
}
`, adminPort, port, u.hostPort()))
	admin := fmt.Sprintf("http://localhost:%d", adminPort)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)

	get(t, url)
	trip(t, url, 3)
	expectOpen(t, u, url)
	st := breakerState(t, admin, "ops")
	if st.Breaker.State != "open" || st.Breaker.OpenForSeconds < 3000 || st.RuleMode != "auto" || st.Override != "" {
		t.Fatalf("after 3 failures: %+v", st)
	}
	if st.Calls["success"] != 1 || st.Calls["failure"] != 3 || st.Rejected != 1 {
		t.Fatalf("calls %v rejected %d, want 1 success, 3 failures, 1 rejected", st.Calls, st.Rejected)
	}
	// The tripping call itself opens the breaker before it enters the window.
	if st.Breaker.Window == nil || st.Breaker.Window.Calls < 3 || st.Breaker.Window.Failures < 2 {
		t.Fatalf("window %+v, want the calls and failures so far", st.Breaker.Window)
	}

	// force_closed admits everything though the upstream still fails.
	if code, body := adminCall(t, admin, "POST", "/sluice/breakers/ops/force_closed"); code != 200 || !strings.Contains(body, `"override":"force_closed"`) {
		t.Fatalf("force_closed: %d %s", code, body)
	}
	for range 5 {
		if code, _, _ := get(t, url, "X-Mode: 500"); code != 500 {
			t.Fatalf("forced closed: got %d, want the upstream's 500", code)
		}
	}
	if st := breakerState(t, admin, "ops"); st.Breaker.State != "forced_closed" {
		t.Fatalf("state %+v", st)
	}

	// force_open refuses everything, even a healthy upstream.
	adminCall(t, admin, "POST", "/sluice/breakers/ops/force_open")
	expectOpen(t, u, url)

	// reset drops the override and closes the breaker with fresh counters.
	if code, body := adminCall(t, admin, "POST", "/sluice/breakers/ops/reset"); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if code, _, _ := get(t, url); code != 200 {
		t.Fatalf("after reset: %d, want 200", code)
	}
	st = breakerState(t, admin, "ops")
	if st.Breaker.State != "closed" || st.Override != "" || st.Breaker.ConsecutiveFailures != 0 || st.Breaker.Window.Calls != 1 {
		t.Fatalf("after reset: %+v", st)
	}

	// Bad requests.
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/sluice/breakers/nope/force_open", 404},
		{"POST", "/sluice/breakers/ops/explode", 400},
		{"GET", "/sluice/breakers/ops/reset", 405},
		{"POST", "/sluice/breakers/bad%20id/reset", 400},
	} {
		if code, body := adminCall(t, admin, c.method, c.path); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.code)
		}
	}
}

// An override outlives a reload and a change of the rule, and wins over
// the rule's state field; reset hands control back to the rule.
func TestOverrideWinsOverRuleState(t *testing.T) {
	u := newUpstream(t)
	port, adminPort := testcaddy.FreePort(t), testcaddy.FreePort(t)
	cf := func(state string) string {
		return fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		circuit_breaker ov {
			state %s
		}
	}
}
http://127.0.0.1:%d {
	circuitbreaker ov
	reverse_proxy %s
}
`, adminPort, state, port, u.hostPort())
	}
	testcaddy.Run(t, cf("force_open"))
	admin := fmt.Sprintf("http://localhost:%d", adminPort)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	expectOpen(t, u, url)
	adminCall(t, admin, "POST", "/sluice/breakers/ov/force_closed")
	if code, _, _ := get(t, url); code != 200 {
		t.Fatalf("override force_closed over rule force_open: %d", code)
	}
	testcaddy.Reload(t, cf("disabled"))
	if st := breakerState(t, admin, "ov"); st.Override != "force_closed" || st.RuleMode != "disabled" {
		t.Fatalf("after reload: %+v", st)
	}
	adminCall(t, admin, "POST", "/sluice/breakers/ov/force_open")
	testcaddy.Eventually(t, 5*time.Second, "forced open over a disabled rule", func() bool {
		code, _, _ := get(t, url)
		return code == 503
	})
	adminCall(t, admin, "POST", "/sluice/breakers/ov/reset")
	testcaddy.Reload(t, cf("force_open"))
	expectOpen(t, u, url)
}
