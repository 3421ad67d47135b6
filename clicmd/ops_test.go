package clicmd_test

// End-to-end tests of operating Sluice: the state endpoint under real
// traffic, events, and metrics across a reload, on real Caddy with the full
// chain (ratelimit -> circuitbreaker -> grayroute -> reverse_proxy).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

type recordEvents struct{}

var seen struct {
	sync.Mutex
	events []caddy.Event
}

func (recordEvents) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.opstest_record", New: func() caddy.Module { return recordEvents{} }}
}

func (recordEvents) Handle(_ context.Context, e caddy.Event) error {
	seen.Lock()
	defer seen.Unlock()
	seen.events = append(seen.events, e)
	return nil
}

func init() { caddy.RegisterModule(recordEvents{}) }

func eventsNamed(name string) []caddy.Event {
	seen.Lock()
	defer seen.Unlock()
	var out []caddy.Event
	for _, e := range seen.events {
		if e.Name() == name {
			out = append(out, e)
		}
	}
	return out
}

// chain is the full chain on one site, with a failing upstream at /fail.
func chain(adminPort, port, upstreamPort int, qps string) string {
	return fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	metrics
	rulestore {
		rate_limit rl {
			limit_type   token_bucket
			qps          %s
			burst        5
			key_resolver userId
		}
		circuit_breaker cb {
			failure_threshold 2
			open_duration     1h
		}
		gray canary {
			match_tag      X-Canary
			match_value    true
			target_version v2
		}
	}
}
http://127.0.0.1:%d {
	ratelimit rl
	circuitbreaker cb
	grayroute canary
	reverse_proxy 127.0.0.1:%d
}
http://127.0.0.1:%d {
	respond /fail "broken" 500
	respond "ok"
}
`, adminPort, qps, port, upstreamPort, upstreamPort)
}

// loadWithEvents loads a Caddyfile with the events app subscribed to every
// Sluice event.
func loadWithEvents(t *testing.T, caddyfile string) {
	t.Helper()
	cfgJSON, err := testcaddy.Adapt(caddyfile)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON = testcaddy.SubscribeEvents(t, cfgJSON, "opstest_record", "ratelimit_exceeded", "circuit_open", "rule_updated", "rule_rejected")
	testcaddy.RunJSON(t, cfgJSON) // skipped under -short; stopped at cleanup
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, body := testcaddy.Get(t, url)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

type state struct {
	Ratelimit struct {
		Rules []ratelimit.RuleState `json:"rules"`
	} `json:"ratelimit"`
	Circuitbreaker struct {
		Rules []struct {
			Rule    string `json:"rule"`
			Breaker struct {
				State          string  `json:"state"`
				OpenForSeconds float64 `json:"open_for_seconds"`
			} `json:"breaker"`
			Rejected int64 `json:"rejected"`
		} `json:"rules"`
	} `json:"circuitbreaker"`
	Grayroute struct {
		Rules []struct {
			Rule     string           `json:"rule"`
			Versions map[string]int64 `json:"versions"`
		} `json:"rules"`
	} `json:"grayroute"`
	Rulestore struct {
		Redis    bool           `json:"redis"`
		Rules    map[string]int `json:"rules"`
		Versions map[string]map[string]struct {
			Version string `json:"version"`
		} `json:"versions"`
	} `json:"rulestore"`
}

// The state endpoint shows what real traffic did: a user over the limit
// (masked), a breaker opened by a failing upstream, the gray split, the
// rules in force; the events fire, ratelimit_exceeded once per period.
func TestStateReflectsTraffic(t *testing.T) {
	seen.Lock()
	seen.events = nil
	seen.Unlock()
	adminPort, port, up := testcaddy.FreePort(t), testcaddy.FreePort(t), testcaddy.FreePort(t)
	loadWithEvents(t, chain(adminPort, port, up, "0.001"))
	site := fmt.Sprintf("http://127.0.0.1:%d", port)
	admin := fmt.Sprintf("http://localhost:%d", adminPort)
	// Gray counters are process-wide: count from here.
	var st0 state
	getJSON(t, admin+"/sluice/state", &st0)
	splits0 := map[string]map[string]int64{}
	for _, r := range st0.Grayroute.Rules {
		splits0[r.Rule] = r.Versions
	}

	// alice: 5 allowed (the burst), then 3 refused.
	codes := []int{}
	for range 8 {
		resp, _ := testcaddy.Get(t, site+"/", "X-User-Id: alice", "X-Canary: true")
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 429 429 429]" {
		t.Fatalf("alice got %v", codes)
	}
	// bob breaks the upstream twice: the breaker opens.
	testcaddy.Get(t, site+"/fail", "X-User-Id: bob")
	testcaddy.Get(t, site+"/fail", "X-User-Id: bob")
	if resp, _ := testcaddy.Get(t, site+"/", "X-User-Id: bob"); resp.StatusCode != 503 {
		t.Fatalf("open breaker: got %d", resp.StatusCode)
	}

	var st state
	getJSON(t, admin+"/sluice/state", &st)
	if len(st.Ratelimit.Rules) != 1 {
		t.Fatalf("ratelimit state: %+v", st.Ratelimit)
	}
	rl := st.Ratelimit.Rules[0]
	if rl.Rule != "rl" || rl.Requests["allowed"] != 8 || rl.Requests["rejected"] != 3 || rl.Keys != 2 {
		t.Fatalf("ratelimit rule state: %+v", rl)
	}
	top := rl.TopKeys[0]
	if top.Key != ratelimit.MaskKey("user:alice") || !top.Limited || top.Remaining != 0 || top.UsedShare < 0.99 ||
		len(rl.TopKeys) != 2 || rl.TopKeys[1].Limited || rl.TopKeys[1].Remaining != 2 {
		t.Fatalf("top key: %+v (want alice, masked, limited)", rl.TopKeys)
	}
	raw, _ := json.Marshal(st)
	if strings.Contains(string(raw), "alice") || strings.Contains(string(raw), "bob") {
		t.Fatalf("state shows raw keys: %s", raw)
	}
	cb := st.Circuitbreaker.Rules[0]
	if cb.Rule != "cb" || cb.Breaker.State != "open" || cb.Breaker.OpenForSeconds < 3000 || cb.Rejected != 1 {
		t.Fatalf("breaker state: %+v", st.Circuitbreaker)
	}
	splits := map[string]map[string]int64{}
	for _, r := range st.Grayroute.Rules {
		splits[r.Rule] = r.Versions
	}
	// 5 canary requests of alice reached grayroute (v2); bob's 2 did not match (v1).
	if splits["canary"]["v2"]-splits0["canary"]["v2"] != 5 || splits[""]["v1"]-splits0[""]["v1"] != 2 {
		t.Fatalf("gray splits: %+v", splits)
	}
	if st.Rulestore.Redis || st.Rulestore.Rules["rate_limit"] != 1 || st.Rulestore.Versions["circuit_breaker"]["cb"].Version == "" {
		t.Fatalf("store state: %+v", st.Rulestore)
	}

	// One ratelimit_exceeded event for the 3 rejections; more rejections
	// within the period make no new event.
	testcaddy.Eventually(t, 5*time.Second, "ratelimit_exceeded event", func() bool { return len(eventsNamed("ratelimit_exceeded")) == 1 })
	e := eventsNamed("ratelimit_exceeded")[0]
	if e.Data["rule"] != "rl" || e.Data["rejected"] != int64(3) {
		t.Fatalf("event data: %v", e.Data)
	}
	if keys := fmt.Sprint(e.Data["top_keys"]); !strings.Contains(keys, ratelimit.MaskKey("user:alice")) || strings.Contains(keys, "alice") {
		t.Fatalf("event top keys: %s", keys)
	}
	for range 20 {
		testcaddy.Get(t, site+"/", "X-User-Id: alice")
	}
	// The sampler holds the 20 (interval not over): once it has seen them,
	// an event for them would already have been sent.
	testcaddy.Eventually(t, 10*time.Second, "the sampler holds the 20 rejections", func() bool {
		var now state
		getJSON(t, admin+"/sluice/state", &now)
		for _, r := range now.Ratelimit.Rules {
			if r.Rule == "rl" {
				return r.ExceededHeld == 20
			}
		}
		return false
	})
	if n := len(eventsNamed("ratelimit_exceeded")); n != 1 {
		t.Fatalf("%d ratelimit_exceeded events within one period, want 1", n)
	}
	if len(eventsNamed("circuit_open")) != 1 {
		t.Fatalf("circuit_open events: %v", eventsNamed("circuit_open"))
	}

	// A rule written through the admin API (no Redis: memory) applies to
	// the next requests and emits rule_updated; a bad one rule_rejected.
	req, _ := http.NewRequest("PUT", admin+"/sluice/rules/rate_limit/rl",
		strings.NewReader(`{"limit_type":"token_bucket","qps":1000,"burst":1000,"key_resolver":"userId"}`))
	resp, body := testcaddy.Do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, `"stored":"memory"`) {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	t.Cleanup(func() { // the in-memory rule outlives the config: drop it
		req, _ := http.NewRequest("DELETE", admin+"/sluice/rules/rate_limit/rl", nil)
		http.DefaultClient.Do(req)
	})
	// alice is no longer limited (the open breaker answers instead).
	if resp, _ := testcaddy.Get(t, site+"/", "X-User-Id: alice"); resp.StatusCode != 503 {
		t.Fatalf("after PUT: %d, want the breaker's 503", resp.StatusCode)
	}
	req, _ = http.NewRequest("PUT", admin+"/sluice/rules/rate_limit/rl", strings.NewReader(`{"limit_type":"token_bucket","qps":-1}`))
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 400 || !strings.Contains(body, "qps") {
		t.Fatalf("bad PUT: %d %s", resp.StatusCode, body)
	}
	testcaddy.Eventually(t, 5*time.Second, "rule events", func() bool {
		up, rej := eventsNamed("rule_updated"), eventsNamed("rule_rejected")
		return len(up) == 1 && up[0].Data["id"] == "rl" && up[0].Data["source"] == "memory" &&
			len(rej) == 1 && rej[0].Data["field"] == "qps" && rej[0].Data["source"] == "admin_api"
	})
}

func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "sluice_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		fmt.Sscan(line[i+1:], &v)
		out[line[:i]] = v
	}
	return out
}

// Every Sluice series survives `caddy reload`: none vanishes, no counter
// goes back.
func TestMetricsSurviveReload(t *testing.T) {
	adminPort, port, up := testcaddy.FreePort(t), testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, chain(adminPort, port, up, "0.001"))
	site := fmt.Sprintf("http://127.0.0.1:%d", port)
	admin := fmt.Sprintf("http://localhost:%d", adminPort)
	for range 7 {
		testcaddy.Get(t, site+"/", "X-User-Id: dave", "X-Canary: true")
	}
	testcaddy.Get(t, site+"/fail", "X-User-Id: erin")
	testcaddy.Get(t, site+"/fail", "X-User-Id: erin")
	testcaddy.Get(t, site+"/", "X-User-Id: erin")
	before := scrape(t, admin)
	for _, want := range []string{
		`sluice_ratelimit_requests_total{result="allowed",rule="rl"}`,
		`sluice_ratelimit_requests_total{result="rejected",rule="rl"}`,
		`sluice_circuitbreaker_transitions_total{rule="cb",to="open"}`,
		`sluice_circuitbreaker_rejected_total{rule="cb"}`,
		`sluice_circuitbreaker_calls_total{outcome="failure",rule="cb"}`,
		`sluice_grayroute_requests_total{rule="canary",version="v2"}`,
		`sluice_rulestore_rules{kind="rate_limit",source="static"}`,
		`sluice_rulestore_propagation_delay_seconds_count`,
	} {
		if _, ok := before[want]; !ok {
			t.Errorf("before reload: no %s", want)
		}
	}
	if before[`sluice_ratelimit_requests_total{result="rejected",rule="rl"}`] != 2 {
		t.Errorf("rejected before reload: %v", before[`sluice_ratelimit_requests_total{result="rejected",rule="rl"}`])
	}

	// A reload that changes a rule (qps) but keeps every rule id.
	testcaddy.Reload(t, chain(adminPort, port, up, "0.002"))
	testcaddy.Eventually(t, 10*time.Second, "admin endpoint of the new config", func() bool {
		_, err := http.Get(admin + "/metrics")
		return err == nil
	})
	after := scrape(t, admin)
	for series, v := range before {
		if strings.Contains(series, "_rules{") || strings.Contains(series, "_keys{") ||
			strings.Contains(series, "_in_flight{") || strings.Contains(series, "_state{") ||
			strings.Contains(series, "last_resync") {
			if _, ok := after[series]; !ok {
				t.Errorf("gauge %s vanished on reload", series)
			}
			continue
		}
		if w, ok := after[series]; !ok || w < v {
			t.Errorf("%s: %v before reload, %v (present %v) after", series, v, w, ok)
		}
	}
	// State carries on too: the breaker is still open, dave still limited.
	if resp, _ := testcaddy.Get(t, site+"/", "X-User-Id: erin"); resp.StatusCode != 503 {
		t.Errorf("breaker after reload: %d", resp.StatusCode)
	}
	if resp, _ := testcaddy.Get(t, site+"/", "X-User-Id: dave"); resp.StatusCode != 429 {
		t.Errorf("limit after reload: %d", resp.StatusCode)
	}
}
