package clicmd_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
)

const quotaKeyCaddyfile = `{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		rate_limit login_local {
			qps 0.001
			burst 2
			key_resolver user:{http.request.header.X-Login-User}
		}
		rate_limit login_cluster {
			qps 0.001
			burst 2
			scope cluster
			key_resolver user:{http.request.header.X-Login-User}
		}
	}
}
http://127.0.0.1:%d {
	ratelimit /local login_local
	ratelimit /cluster login_cluster
	respond "ok"
}
`

// "Why was alice limited?" The quota tool answers for the key a user
// gives: as stored without the resolver's prefix (user:alice for
// key0:user:alice), or as a request with X-Login-User: alice resolves;
// it names the key it looked up, and says "never seen" for a key with no
// state. For a local rule (memory) and a cluster rule (Redis).
func TestCLIQuotaAnswersForTheKeyTheUserGives(t *testing.T) {
	r := redistest.Start(t)
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(quotaKeyCaddyfile, r.URL(), port))
	testcaddy.Eventually(t, 10*time.Second, "connected to redis", func() bool {
		out, _, ok := sluice(t, p, "store")
		return ok && strings.Contains(out, `"connected": true`)
	})
	for _, scope := range []string{"local", "cluster"} {
		rule := "login_" + scope
		site := fmt.Sprintf("http://127.0.0.1:%d/%s", port, scope)
		var codes []int
		for range 3 {
			resp, _ := testcaddy.Get(t, site, "X-Login-User: alice")
			codes = append(codes, resp.StatusCode)
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Fatalf("%s: alice's requests: %v", rule, codes)
		}

		out := mustSluice(t, p, "quota", rule, "user:alice")
		if !strings.Contains(out, "remaining 0") || strings.Contains(out, "never seen") ||
			!strings.Contains(out, "looked up key0:user:alice: stored key, with the resolver's prefix (given user:alice)") {
			t.Fatalf("%s: quota user:alice:\n%s", rule, out)
		}
		out = mustSluice(t, p, "quota", rule, "--header", "X-Login-User=alice")
		if !strings.Contains(out, rule+" key0:user:alice ") || !strings.Contains(out, "remaining 0") ||
			!strings.Contains(out, "resolved from request values (given header.X-Login-User=alice)") {
			t.Fatalf("%s: quota --header X-Login-User=alice:\n%s", rule, out)
		}
		var u struct {
			Key      string  `json:"key"`
			LookedUp string  `json:"looked_up"`
			Tracked  bool    `json:"tracked"`
			Used     float64 `json:"used"`
		}
		js := mustSluice(t, p, "quota", rule, "key0:user:alice", "--json")
		if err := json.Unmarshal([]byte(js), &u); err != nil || u.Key != "key0:user:alice" || !u.Tracked || u.LookedUp != "stored key" || math.Abs(u.Used-2) > 0.05 {
			t.Fatalf("%s: quota key0:user:alice --json: %v %s", rule, err, js)
		}
		if scope == "local" { // one meaning of used: the state's top keys count as the quota does
			var st struct {
				Ratelimit struct {
					Rules []ratelimit.RuleState `json:"rules"`
				} `json:"ratelimit"`
			}
			getJSON(t, fmt.Sprintf("http://localhost:%d/sluice/state", p.AdminPort), &st)
			found := false
			for _, rs := range st.Ratelimit.Rules {
				for _, k := range rs.TopKeys {
					if rs.Rule == rule && k.Key == ratelimit.MaskKey("key0:user:alice") {
						found = true
						if math.Abs(k.Used-u.Used) > 0.05 || k.UsedShare < 0.97 {
							t.Fatalf("state top key used %v (share %v), quota used %v", k.Used, k.UsedShare, u.Used)
						}
					}
				}
			}
			if !found {
				t.Fatalf("alice not among the state's top keys: %+v", st.Ratelimit.Rules)
			}
		}
		out = mustSluice(t, p, "quota", rule, "--header", "X-Login-User=bob")
		if !strings.Contains(out, "remaining 2") || !strings.Contains(out, "(never seen)") || !strings.Contains(out, "never seen: no state for key \"key0:user:bob\"") {
			t.Fatalf("%s: quota for a user never seen:\n%s", rule, out)
		}
		if _, errOut, ok := sluice(t, p, "quota", rule, "user:alice", "--ip", "203.0.113.7"); ok || !strings.Contains(errOut, "not both") {
			t.Fatalf("%s: key and request values: ok=%v %s", rule, ok, errOut)
		}
	}
}
