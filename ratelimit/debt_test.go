package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

// debtRecorder is an events.handlers module keeping the ratelimit_debt
// events it is sent, by rule.
type debtRecorder struct{}

var debtEvents struct {
	mu   sync.Mutex
	seen map[string][]map[string]any
}

func (debtRecorder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.rltest_debt", New: func() caddy.Module { return new(debtRecorder) }}
}

func (debtRecorder) Handle(_ context.Context, e caddy.Event) error {
	debtEvents.mu.Lock()
	defer debtEvents.mu.Unlock()
	if debtEvents.seen == nil {
		debtEvents.seen = map[string][]map[string]any{}
	}
	rule, _ := e.Data["rule"].(string)
	debtEvents.seen[rule] = append(debtEvents.seen[rule], e.Data)
	return nil
}

func init() { caddy.RegisterModule(debtRecorder{}) }

func debtEventsOf(rule string) []map[string]any {
	debtEvents.mu.Lock()
	defer debtEvents.mu.Unlock()
	return append([]map[string]any(nil), debtEvents.seen[rule]...)
}

// debtSteps are one user's requests on a rule of burst 100, reserve 10,
// max_cost 100, and the settlement of each: what the metrics must count.
var debtSteps = []struct {
	path   string
	status int
}{
	{"/use?n=30", 200},  // 100-10 = 90, charged 20 more: 70
	{"/use?n=5", 200},   // 60, refunded 5: 65
	{"/use?n=100", 200}, // 55, charged 90 more: -35, in debt
	{"/use?n=1", 429},   // refused: -35 cannot cover the reserve
}

const (
	debtCharged  = 20 + 90
	debtRefunded = 5
	debtOwed     = 35
)

const debtSite = `{
	admin localhost:%d
	persist_config off
	metrics
	%s
}
http://127.0.0.1:%d {
	ratelimit {
		qps 0.001
		burst 100
		key_resolver userId
		response_cost {http.response.header.X-Tokens-Used}
		reserve 10
		max_cost 100
		%s
	}
	reverse_proxy %s
}`

// runDebtSite runs debtSite with the ratelimit_debt event subscribed, and
// returns its URL and a scrape of its metrics.
func runDebtSite(t *testing.T, global, rule string) (string, func() string) {
	t.Helper()
	up := usageUpstream(t)
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	cfg, err := testcaddy.Adapt(fmt.Sprintf(debtSite, admin, global, site, rule, up.URL))
	if err != nil {
		t.Fatal(err)
	}
	testcaddy.RunJSON(t, testcaddy.SubscribeEvents(t, cfg, "rltest_debt", ratelimit.EventDebt))
	return fmt.Sprintf("http://127.0.0.1:%d", site), func() string { return metrics(t, admin) }
}

// runDebtSteps sends debtSteps as user, and returns the inline rule's id.
func runDebtSteps(t *testing.T, url, user string) string {
	t.Helper()
	var id string
	for i, st := range debtSteps {
		resp, body := testcaddy.Get(t, url+st.path, "X-User-Id: "+user)
		if resp.StatusCode != st.status {
			t.Fatalf("step %d %s: %d %q, want %d", i+1, st.path, resp.StatusCode, body, st.status)
		}
		if p := resp.Header.Get("RateLimit-Policy"); p != "" {
			id, _, _ = strings.Cut(strings.Trim(p, `"`), `"`)
		}
	}
	return id
}

// A local rule's settlements through real Caddy: the tokens charged and
// refunded are counted exactly as computed from the reserve and the
// reported cost, the key in debt shows in the gauges (read from the key
// table at scrape), and one ratelimit_debt event names it, masked; a
// second key entering debt within the interval gets no event of its own.
func TestSettleMetricsAndDebtEventLocal(t *testing.T) {
	url, scrape := runDebtSite(t, "", "")
	id := runDebtSteps(t, url, "alice")
	if id == "" {
		t.Fatal("no RateLimit-Policy header: the rule's id is unknown")
	}
	m := scrape()
	for _, c := range []struct {
		series string
		want   float64
	}{
		{fmt.Sprintf(`sluice_ratelimit_cost_tokens_total{kind="charged",rule=%q}`, id), debtCharged},
		{fmt.Sprintf(`sluice_ratelimit_cost_tokens_total{kind="refunded",rule=%q}`, id), debtRefunded},
		{fmt.Sprintf(`sluice_ratelimit_debt_entered_total{rule=%q}`, id), 1},
		{fmt.Sprintf(`sluice_ratelimit_debt_keys{rule=%q}`, id), 1},
	} {
		if got := metricValue(m, c.series+" "); got != c.want {
			t.Errorf("%s = %v, want %v\n%s", c.series, got, c.want, grep(m, "sluice_ratelimit_"))
		}
	}
	// The refill at 0.001/s pays back a little meanwhile.
	owed := metricValue(m, fmt.Sprintf(`sluice_ratelimit_debt_tokens{rule=%q} `, id))
	if owed > debtOwed || owed < debtOwed-0.1 {
		t.Errorf("debt_tokens = %v, want just under %d", owed, debtOwed)
	}

	testcaddy.Eventually(t, 5*time.Second, "a ratelimit_debt event", func() bool { return len(debtEventsOf(id)) > 0 })
	// Another key into debt within the interval: counted, not announced.
	runDebtSteps(t, url, "bob")
	if got := metricValue(scrape(), fmt.Sprintf(`sluice_ratelimit_debt_keys{rule=%q} `, id)); got != 2 {
		t.Errorf("debt_keys after bob = %v, want 2", got)
	}
	time.Sleep(2500 * time.Millisecond) // sleep: two ticks or more, in which no second event may come (nothing to wait on for an absence)
	evs := debtEventsOf(id)
	if len(evs) != 1 {
		t.Fatalf("%d ratelimit_debt events within %v, want 1: %v", len(evs), ratelimit.DebtEventInterval, evs)
	}
	checkDebtEvent(t, evs[0], 1, ratelimit.MaskKey("user:alice"))
}

// checkDebtEvent checks an event's count and its keys, masked.
func checkDebtEvent(t *testing.T, ev map[string]any, entered uint64, keys ...string) {
	t.Helper()
	got, _ := ev["keys"].([]string)
	sort.Strings(keys)
	if ev["entered"] != entered || fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Errorf("event %v, want entered %d keys %v", ev, entered, keys)
	}
	for _, k := range got {
		if strings.Contains(k, "alice") || strings.Contains(k, "bob") {
			t.Errorf("event shows a raw key: %v", ev)
		}
	}
}

// A cluster rule's settlements go to Redis; the metrics count them as
// this instance settled them, and Redis's reply to the settlement says
// whether the key entered debt (no further call): the counters and the
// event are the same as a local rule's. A cluster rule's debt is in
// Redis, so it exports no debt gauges.
func TestSettleMetricsAndDebtEventCluster(t *testing.T) {
	rd := redistest.Start(t)
	url, scrape := runDebtSite(t, "rulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		"scope cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny")
	id := runDebtSteps(t, url, "alice")
	// The settlement of the last admitted request may still be in flight
	// when the refusal is answered.
	testcaddy.Eventually(t, 5*time.Second, "the debt counted", func() bool {
		return metricValue(scrape(), fmt.Sprintf(`sluice_ratelimit_debt_entered_total{rule=%q} `, id)) == 1
	})
	m := scrape()
	if got := metricValue(m, fmt.Sprintf(`sluice_ratelimit_cost_tokens_total{kind="charged",rule=%q} `, id)); got != debtCharged {
		t.Errorf("charged = %v, want %d", got, debtCharged)
	}
	if got := metricValue(m, fmt.Sprintf(`sluice_ratelimit_cost_tokens_total{kind="refunded",rule=%q} `, id)); got != debtRefunded {
		t.Errorf("refunded = %v, want %d", got, debtRefunded)
	}
	if strings.Contains(m, "sluice_ratelimit_debt_keys{rule="+fmt.Sprintf("%q", id)) {
		t.Errorf("a cluster rule exports debt gauges:\n%s", grep(m, "debt"))
	}
	testcaddy.Eventually(t, 5*time.Second, "a ratelimit_debt event", func() bool { return len(debtEventsOf(id)) > 0 })
	checkDebtEvent(t, debtEventsOf(id)[0], 1, ratelimit.MaskKey("user:alice"))
}

var _ = http.StatusOK
