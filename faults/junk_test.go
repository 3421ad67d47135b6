package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// junkDelayBound is the pass/fail ceiling on how much later a real change
// is applied when 10,000 junk ids were published just before it, compared
// with the same change on quiet channels. The goal is under 50 ms (the
// figures, from a loop, are in docs/reliability.md); the bound is wider
// because the store must still take every junk message off the socket,
// and on this shared 2-core machine the process that does it competes with
// the publisher and everything else. Re-reading each junk id in series, as
// the store did before, costs 300+ ms: that still fails here.
const junkDelayBound = 150 * time.Millisecond

// TestJunkDoesNotDelayRealChanges measures, from Caddy's own log, when a
// real change (HSET + PUBLISH) is applied: first on quiet channels, then
// right after 10,000 PUBLISHes of distinct valid-looking ids that name no
// rule, three times or more. The median trial may be delayed by at most
// junkDelayBound.
func TestJunkDoesNotDelayRealChanges(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r.Addr)
	cfg := chainConfig{
		globals:  "admin localhost:{{admin}}\n\tpersist_config off\n\tlog {\n\t\tformat json\n\t\tlevel INFO\n\t}",
		redisURL: r.URL(),
		gw:       testcaddy.FreePort(t), aux: testcaddy.FreePort(t),
		v1: upstream(t, "v1"), v2: upstream(t, "v2"),
	}
	push(t, c, "rate_limit", "probe", "qps", "100000", "burst", "100000", "key_resolver", "userId")
	p := testcaddy.Start(t, cfg.String())
	waitRule(t, p.AdminPort, "rate_limit", "probe", map[string]string{"qps": "100000"})
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return adminStore(t, p.AdminPort).Connected })
	l := startLoad(t, pick(200, 300), 8, chainRequest(fmt.Sprintf("http://127.0.0.1:%d", cfg.gw)))

	change := 0
	// apply writes a real change and returns how long after its PUBLISH
	// the store applied it, by the timestamp of its "rule updated" line.
	apply := func() time.Duration {
		t.Helper()
		change++
		id := "real-" + strconv.Itoa(change)
		published := time.Now() // just before: includes the write's round trip
		push(t, c, "rate_limit", id, "qps", "5")
		var at time.Time
		testcaddy.Eventually(t, 30*time.Second, "rule "+id+" applied", func() bool {
			at = ruleUpdatedAt(p.Logs(), "rate_limit:rule:"+id)
			return !at.IsZero()
		})
		return at.Sub(published)
	}
	var quiet []time.Duration
	for range 5 {
		quiet = append(quiet, apply())
	}
	slices.Sort(quiet)
	baseline := quiet[len(quiet)/2]

	n := 10000
	ctx := context.Background()
	var worst time.Duration
	var after []time.Duration
	for trial := range pick(3, 10) {
		pipe := c.Pipeline()
		for i := range n {
			pipe.Publish(ctx, "gateway:rules:rate_limit", fmt.Sprintf("absent-%d-%d", trial, i))
			if i%1000 == 999 {
				if _, err := pipe.Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		d := apply()
		after = append(after, d)
		worst = max(worst, d)
	}
	l.stopLoad()
	l.report(busyLatency, 0) // no reload: nothing closes a connection
	// The median trial: the fault this catches (junk ids re-read one by
	// one) delays every trial by 300+ ms, while a busy box can hold one
	// trial back that long by itself (CI-like run at load 17: 295, 22 and
	// 33 ms).
	sorted := slices.Clone(after)
	slices.Sort(sorted)
	delay := sorted[len(sorted)/2] - baseline
	t.Logf("RESULT real change applied %v after its PUBLISH on quiet channels (median of %v); after %d junk ids: %v (worst %v); median delay by the junk %v (bound %v)",
		baseline.Round(100*time.Microsecond), roundAll(quiet), n, roundAll(after), worst.Round(100*time.Microsecond), delay.Round(100*time.Microsecond), junkDelayBound)
	if delay > junkDelayBound {
		t.Errorf("%d junk ids delayed a real change by %v (bound %v)", n, delay, junkDelayBound)
	}
}

// ruleUpdatedAt finds the store's "rule updated" line for key in a JSON
// log and returns its time (zero if not there yet).
func ruleUpdatedAt(logs, key string) time.Time {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"rule updated"`) || !strings.Contains(line, key) {
			continue
		}
		var e struct {
			TS  float64 `json:"ts"`
			Key string  `json:"key"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Key == key {
			sec := int64(e.TS)
			return time.Unix(sec, int64((e.TS-float64(sec))*1e9))
		}
	}
	return time.Time{}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond)
	}
	return out
}
