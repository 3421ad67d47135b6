package rulestore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// lastGoodCaddyfile declares the gray rule product_canary at weight 100
// and uses the rate-limit rule new_api, which lives only in Redis.
func lastGoodCaddyfile(redisURL string, port int) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		gray product_canary {
			match_tag        X-Canary
			match_value      true
			target_version   v2
			fallback_version v1
			weight           100
		}
	}
}
http://127.0.0.1:%d {
	handle /gray {
		grayroute product_canary
		respond "{http.grayroute.version}"
	}
	handle /rl {
		ratelimit new_api
		respond "ok"
	}
}`, redisURL, port)
}

// verdictStates maps each instance's verdict on a rule to "state version".
func verdictStates(t *testing.T, c *redis.Client, kind, id string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for who, raw := range c.HGetAll(t.Context(), "gateway:status:"+kind+":"+id).Val() {
		var v struct{ State, Version string }
		json.Unmarshal([]byte(raw), &v)
		out[who] = v.State + " " + v.Version
	}
	return out
}

// waitVerdicts waits until n instances report state on the rule's hash
// as it is now.
func waitVerdicts(t *testing.T, c *redis.Client, kind, key, id, state string, n int) {
	t.Helper()
	testcaddy.Eventually(t, 20*time.Second, fmt.Sprintf("%d %s verdicts on %s %s", n, state, kind, id), func() bool {
		want := state + " " + hashVersion(c.HGetAll(t.Context(), key).Val())
		got := 0
		for _, v := range verdictStates(t, c, kind, id) {
			if v == want {
				got++
			}
		}
		return got == n
	})
}

// hashVersion is the version of a rule hash's fields.
func hashVersion(f map[string]string) string { return rulestore.Version(rulestore.Fields(f)) }

// canaryAnswers is the version each of 20 tagged users is sent to.
func canaryAnswers(t *testing.T, base string) string {
	t.Helper()
	var out []string
	for i := range 20 {
		_, body := testcaddy.Get(t, base+"/gray", "X-Canary: true", fmt.Sprintf("X-User-Id: user-%d", i))
		out = append(out, body)
	}
	return strings.Join(out, " ")
}

// An instance that starts while Redis holds a rejected value serves the
// version the running instances serve: for an overlay of a Caddyfile rule
// (not the Caddyfile's weight 100) and for a rule held only in Redis (not
// "no rule", which would let every request through).
func TestRestartedInstanceServesTheFleetsLastGood(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	var procs []*testcaddy.Process
	var files, bases []string
	for range 2 {
		port := testcaddy.FreePort(t)
		f := lastGoodCaddyfile(r.URL(), port)
		files, bases = append(files, f), append(bases, fmt.Sprintf("http://127.0.0.1:%d", port))
		procs = append(procs, testcaddy.Start(t, f))
	}
	redistest.Push(t, c, "gray:rule:product_canary", "gateway:rules:gray", "product_canary", "weight", "10")
	redistest.Push(t, c, "rate_limit:rule:new_api", "gateway:rules:rate_limit", "new_api",
		"limit_type", "token_bucket", "qps", "0.001", "burst", "1", "key_resolver", "global")
	waitVerdicts(t, c, "gray", "gray:rule:product_canary", "product_canary", "accepted", 2)
	waitVerdicts(t, c, "rate_limit", "rate_limit:rule:new_api", "new_api", "accepted", 2)
	running := canaryAnswers(t, bases[0])
	if !strings.Contains(running, "v1") || !strings.Contains(running, "v2") {
		t.Fatalf("weight 10: tagged users answered %q, want some on v1 and some on v2", running)
	}

	// Bad values, rejected by both instances.
	redistest.Push(t, c, "gray:rule:product_canary", "gateway:rules:gray", "product_canary", "weight", "150")
	redistest.Push(t, c, "rate_limit:rule:new_api", "gateway:rules:rate_limit", "new_api", "qps", "abc")
	waitVerdicts(t, c, "gray", "gray:rule:product_canary", "product_canary", "rejected", 2)
	waitVerdicts(t, c, "rate_limit", "rate_limit:rule:new_api", "new_api", "rejected", 2)

	procs[1].Restart(files[1])
	// The restarted instance loads the bad values and falls back to the
	// fleet's last good version of each.
	testcaddy.Eventually(t, 20*time.Second, "restarted instance's verdicts", func() bool {
		return len(verdictStates(t, c, "gray", "product_canary")) == 3 && len(verdictStates(t, c, "rate_limit", "new_api")) == 3
	})
	if got := canaryAnswers(t, bases[1]); got != running {
		t.Fatalf("restarted instance sends tagged users to\n%s\nthe running one to\n%s", got, running)
	}
	if got := canaryAnswers(t, bases[0]); got != running {
		t.Fatalf("running instance changed its answers to %q", got)
	}
	code, body := adminCall(t, procs[1], "GET", "/sluice/rules/rate_limit/new_api", "")
	if code != 200 || !strings.Contains(body, `"qps":"0.001"`) {
		t.Fatalf("restarted instance's rule new_api: %d %s", code, body)
	}
	if resp, _ := testcaddy.Get(t, bases[1]+"/rl"); resp.StatusCode != 200 {
		t.Fatalf("first request on new_api: %d", resp.StatusCode)
	}
	if resp, _ := testcaddy.Get(t, bases[1]+"/rl"); resp.StatusCode != 429 {
		t.Fatalf("second request on new_api (burst 1): %d, want 429", resp.StatusCode)
	}
}
