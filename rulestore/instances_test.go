package rulestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// gateway is the built Caddy with a rate-limited site whose rule comes
// from the store: a static default that Redis overrides.
func gatewayCaddyfile(redisURL string, port int) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		rate_limit order_api {
			qps 1000
			key_resolver global
		}
	}
}
http://127.0.0.1:%d {
	ratelimit order_api
	respond "ok"
}`, redisURL, port)
}

// admitted sends n requests and counts the 200s.
func admitted(t *testing.T, url string, n int) int {
	ok := 0
	for i := 0; i < n; i++ {
		if resp, _ := testcaddy.Get(t, url); resp.StatusCode == 200 {
			ok++
		}
	}
	return ok
}

func TestRulePushedReachesEveryInstance(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	var urls []string
	var ports []int
	var procs []*testcaddy.Process
	for i := 0; i < 2; i++ {
		port := testcaddy.FreePort(t)
		procs = append(procs, testcaddy.Start(t, gatewayCaddyfile(r.URL(), port)))
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/", port))
		ports = append(ports, port)
	}
	for _, u := range urls {
		if got := admitted(t, u, 5); got != 5 {
			t.Fatalf("static rule (1000 qps): %d of 5 admitted on %s", got, u)
		}
	}

	c.HSet(ctx, "rate_limit:rule:order_api", "limit_type", "token_bucket", "qps", "0.001", "burst", "2", "key_resolver", "global")
	c.Publish(ctx, "gateway:rules:rate_limit", "order_api")
	for i, u := range urls {
		testcaddy.Eventually(t, 10*time.Second, "instance "+fmt.Sprint(i)+" rejects", func() bool {
			resp, _ := testcaddy.Get(t, u)
			return resp.StatusCode == 429
		})
	}

	// Reload one instance with the same settings: it keeps following Redis.
	if err := procs[0].Reload(gatewayCaddyfile(r.URL(), ports[0])); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, "rate_limit:rule:order_api")
	c.Publish(ctx, "gateway:rules:rate_limit", "order_api")
	for i, u := range urls {
		testcaddy.Eventually(t, 10*time.Second, "instance "+fmt.Sprint(i)+" back on the static rule", func() bool {
			resp, _ := testcaddy.Get(t, u)
			return resp.StatusCode == 200
		})
	}
}
