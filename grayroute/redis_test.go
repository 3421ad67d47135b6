package grayroute_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

func TestRuleChangedInRedisMidTraffic(t *testing.T) {
	rds := redistest.Start(t)
	rc := rds.Client()
	ctx := context.Background()
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		redis %s
	}
}
%s {
	grayroute checkout-canary
	%s
}`, testcaddy.Options(t), rds.URL(), addr, echoSite))

	// Traffic from 50 users runs throughout; every request must succeed.
	var (
		stop     atomic.Bool
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("X-User-Id", fmt.Sprintf("u%d", i%50))
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				failures.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
	defer func() {
		stop.Store(true)
		wg.Wait()
		if n := failures.Load(); n > 0 {
			t.Errorf("%d requests failed during the rule changes", n)
		}
	}()

	// The rule does not exist yet: requests pass with the default version.
	if got := version(get(t, url, "X-User-Id: u1")); got != "v1" {
		t.Fatalf("rule not in Redis yet: got %s, want the default v1", got)
	}

	push := func(fields ...any) {
		t.Helper()
		if err := rc.HSet(ctx, "gray:rule:checkout-canary", fields...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.Publish(ctx, "gateway:rules:gray", "checkout-canary").Err(); err != nil {
			t.Fatal(err)
		}
	}
	allOn := func(want string) func() bool {
		return func() bool {
			for i := range 50 {
				if version(get(t, url, fmt.Sprintf("X-User-Id: u%d", i))) != want {
					return false
				}
			}
			return true
		}
	}

	push("target_version", "v2", "weight", "100")
	testcaddy.Eventually(t, 10*time.Second, "weight 100 from Redis to send every user to v2", allOn("v2"))

	push("weight", "0")
	testcaddy.Eventually(t, 10*time.Second, "weight 0 from Redis to send every user back to v1", allOn("v1"))

	push("weight", "100", "target_version", "v3")
	testcaddy.Eventually(t, 10*time.Second, "target_version v3 from Redis", allOn("v3"))
}

func TestRampScriptMovesCanaryTo100(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if testing.Short() {
			t.Skip("redis-cli not installed; skipped under -short")
		}
		t.Fatal("redis-cli not found: run `make test` (scripts/ensure-redis.sh installs it) or `apt-get install -y redis-tools`")
	}
	rds := redistest.Start(t)
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		redis %s
	}
}
%s {
	grayroute checkout-canary
	%s
}`, testcaddy.Options(t), rds.URL(), addr, echoSite))

	host, port, _ := strings.Cut(rds.Addr, ":")
	run := func(steps string) {
		t.Helper()
		cmd := exec.Command("sh", "../examples/canary-ramp/ramp.sh", "checkout-canary", steps)
		cmd.Env = append(os.Environ(), "PAUSE=0", "TARGET=v2", "REDIS_HOST="+host, "REDIS_PORT="+port)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ramp.sh: %v\n%s", err, out)
		}
	}
	users := func(want string, n int) func() bool {
		return func() bool {
			c := 0
			for i := range 200 {
				if version(get(t, url, fmt.Sprintf("X-User-Id: u%d", i))) == want {
					c++
				}
			}
			return c == n
		}
	}
	run("0")
	testcaddy.Eventually(t, 10*time.Second, "weight 0: nobody on v2", users("v2", 0))
	run("0 10 50 100")
	testcaddy.Eventually(t, 10*time.Second, "weight 100: everyone on v2", users("v2", 200))
	if w := rds.Client().HGet(context.Background(), "gray:rule:checkout-canary", "weight").Val(); w != "100" {
		t.Errorf("weight in Redis = %q, want 100", w)
	}
}

func TestRouteBindingOrderFromRedis(t *testing.T) {
	rds := redistest.Start(t)
	rc := rds.Client()
	ctx := context.Background()
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		redis %s
		gray to-v2 {
			match_tag      X-Beta
			target_version v2
		}
		gray to-v3 {
			match_tag      X-Beta
			target_version v3
		}
		binding checkout {
			gray to-v2,to-v3
		}
	}
}
%s {
	grayroute {
		route checkout
	}
	%s
}`, testcaddy.Options(t), rds.URL(), addr, echoSite))

	if got := get(t, url, "X-Beta: 1"); got != "v2|v2|to-v2|v2" {
		t.Fatalf("static binding to-v2,to-v3: got %q, want the first rule to decide", got)
	}
	if got := version(get(t, url)); got != "v1" {
		t.Fatalf("no tag: got %s, want v1", got)
	}
	// Reverse the order in Redis: the binding applies to the next requests.
	if err := rc.HSet(ctx, "gateway:binding:checkout", "gray", "to-v3,to-v2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Publish(ctx, "gateway:rules:binding", "checkout").Err(); err != nil {
		t.Fatal(err)
	}
	testcaddy.Eventually(t, 10*time.Second, "the binding's new order from Redis", func() bool {
		return get(t, url, "X-Beta: 1") == "v3|v3|to-v3|v3"
	})
}
