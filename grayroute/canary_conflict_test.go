package grayroute_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestCanaryCommandConflictWritesNothing: a canary command compares and
// sets the weight and state it read from this instance's copy of the rule.
// When another writer (an analysis verdict on another instance, another
// operator) changed them in Redis and its publish has not reached this
// instance yet, the command answers 409 naming the conflict and writes
// nothing: the rule's hash, the change log and this instance's routing
// are as the other writer left them. Once the other write has arrived,
// the same command goes through.
func TestCanaryCommandConflictWritesNothing(t *testing.T) {
	rds := redistest.Start(t)
	rc := rds.Client()
	ctx := context.Background()
	addr, url := site(t)
	// resync 1h: this instance sees another writer's change only when its
	// publish arrives, which the test controls.
	adminURL := runOnRedis(t, rds.URL(), "resync 1h", addr, `grayroute conflict
	@v2 vars gray_version v2
	handle @v2 {
		respond "v2"
	}
	respond "v1"`)
	const key, stream, channel = "gray:rule:conflict", "gateway:rules", "gateway:rules:gray"
	// Connected, so every change-log entry from here on is read by the
	// store's poll (see below); earlier tests' stores polled the rest.
	polledBefore, logBefore := polledEntries(t, adminURL), rc.XLen(ctx, stream).Val()
	req, _ := http.NewRequest(http.MethodPut, adminURL+"/sluice/rules/gray/conflict", strings.NewReader(
		`{"target_version":"v2","fallback_version":"v1","weight":"20","analysis":"on","analysis_interval":"1h","min_samples":"1000","step_weight":"10"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
		t.Fatalf("PUT rule: %d %s", resp.StatusCode, body)
	}
	ruleShows := func(s ...string) func() bool {
		return func() bool {
			_, body := testcaddy.Get(t, adminURL+"/sluice/rules/gray/conflict")
			for _, want := range s {
				if !strings.Contains(body, want) {
					return false
				}
			}
			return true
		}
	}
	testcaddy.Eventually(t, 10*time.Second, "the rule on this instance", ruleShows(`"weight":"20"`))

	// v2's share of 200 users, as this instance routes them.
	onV2 := func() int {
		n := 0
		for i := 0; i < 200; i++ {
			if get(t, url, fmt.Sprintf("X-User-Id: u%d", i)) == "v2" {
				n++
			}
		}
		return n
	}

	for _, c := range []struct {
		name   string
		other  []any  // what the other writer sets in the hash
		action string // the command that meets it
		shows  string // this instance's rule once the other write arrives
		after  map[string]string
	}{
		{"a verdict advanced the weight", []any{"weight", "30"}, "rollback", `"weight":"30"`,
			map[string]string{"state": "rolled_back", "weight": "0"}},
		{"another operator paused it", []any{"state", "paused"}, "promote", `"state":"paused"`,
			map[string]string{"state": "promoted", "weight": "100"}},
	} {
		// The canary running at 20 %, written through the normal path.
		req, _ := http.NewRequest(http.MethodPatch, adminURL+"/sluice/rules/gray/conflict", strings.NewReader(`{"state":"running","weight":"20"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, body := testcaddy.Do(t, req); resp.StatusCode != 200 {
			t.Fatalf("%s: PATCH: %d %s", c.name, resp.StatusCode, body)
		}
		testcaddy.Eventually(t, 10*time.Second, c.name+": the canary running at 20 %", ruleShows(`"weight":"20"`, `"state":"running"`))
		// The store also re-reads, once a second, every rule named in the
		// change log (for publishes it missed). Until it has read the
		// PATCH's entry, that poll could pick up the other writer's change
		// below before the command meets it: wait for it first.
		testcaddy.Eventually(t, 10*time.Second, c.name+": the change log read up to the PATCH", func() bool {
			return polledEntries(t, adminURL)-polledBefore >= rc.XLen(ctx, stream).Val()-logBefore
		})
		share := onV2()
		if share == 0 || share == 200 {
			t.Fatalf("%s: %d of 200 users on v2 at weight 20", c.name, share)
		}

		// The other writer's change is in Redis; its publish is on the way.
		if err := rc.HSet(ctx, key, c.other...).Err(); err != nil {
			t.Fatal(err)
		}
		hash, err := rc.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		logLen := rc.XLen(ctx, stream).Val()

		resp, body := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/canary/conflict/"+c.action))
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `gray rule \"conflict\" changed while writing`) {
			t.Fatalf("%s: %s: %d %s; want 409 naming the conflict", c.name, c.action, resp.StatusCode, body)
		}
		if now := rc.HGetAll(ctx, key).Val(); !maps.Equal(now, hash) {
			t.Fatalf("%s: the refused %s changed the rule in Redis:\n  before %v\n  after  %v", c.name, c.action, hash, now)
		}
		if n := rc.XLen(ctx, stream).Val(); n != logLen {
			t.Fatalf("%s: the refused %s added %d change-log entries", c.name, c.action, n-logLen)
		}
		if got := onV2(); got != share {
			t.Fatalf("%s: after the refused %s, %d users on v2, want the %d of before", c.name, c.action, got, share)
		}

		// The other write arrives; the operator looks and tries again.
		if err := rc.Publish(ctx, channel, "conflict").Err(); err != nil {
			t.Fatal(err)
		}
		testcaddy.Eventually(t, 10*time.Second, c.name+": the other write on this instance", ruleShows(c.shows))
		if resp, body := testcaddy.Do(t, mustReq(t, "POST", adminURL+"/sluice/canary/conflict/"+c.action)); resp.StatusCode != 200 {
			t.Fatalf("%s: %s again: %d %s", c.name, c.action, resp.StatusCode, body)
		}
		now := rc.HGetAll(ctx, key).Val()
		for f, v := range c.after {
			if now[f] != v {
				t.Fatalf("%s: after the retried %s, Redis has %s=%q, want %q (%v)", c.name, c.action, f, now[f], v, now)
			}
		}
		if n := rc.XLen(ctx, stream).Val(); n != logLen+1 {
			t.Fatalf("%s: the retried %s added %d change-log entries, want 1", c.name, c.action, n-logLen)
		}
	}
}

// polledEntries is how many change-log entries this process's stores have
// read by polling (each is one observation of the propagation delay).
func polledEntries(t *testing.T, adminURL string) int64 {
	_, body := testcaddy.Get(t, adminURL+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_rulestore_propagation_delay_seconds_count "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return int64(n)
		}
	}
	return 0
}
