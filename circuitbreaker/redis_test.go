package circuitbreaker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A rule in Redis drives the breaker; changes pushed mid-traffic apply to
// the next requests; a threshold change keeps an open breaker open; a
// route binding pushed to Redis puts a route behind the same breaker.
func TestRuleFromRedisLive(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	const key, channel = "circuit_breaker:rule:orders", "gateway:rules:circuit_breaker"
	redistest.Push(t, c, key, channel, "orders", "state", "force_open", "body", "forced")
	u := newUpstream(t)
	port := testcaddy.FreePort(t)
	cf := fmt.Sprintf(`{
	%s
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	handle /orders* {
		circuitbreaker orders
		reverse_proxy %s
	}
	handle /checkout* {
		circuitbreaker {
			route checkout
		}
		reverse_proxy %s
	}
}
`, testcaddy.Options(t), r.URL(), port, u.hostPort(), u.hostPort())
	testcaddy.Run(t, cf)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)

	body := func(path string) (int, string) {
		code, _, b := get(t, url+path)
		return code, b
	}
	testcaddy.Eventually(t, 10*time.Second, "force_open rule from redis", func() bool {
		code, b := body("/orders")
		return code == 503 && b == "forced"
	})

	// Back to auto with a threshold of 3: traffic flows, then 3 failures open it.
	redistest.Push(t, c, key, channel, "orders", "state", "auto", "failure_threshold", "3", "body", "open")
	testcaddy.Eventually(t, 10*time.Second, "state auto", func() bool { code, _ := body("/orders"); return code == 200 })
	trip(t, url+"/orders", 3)
	expectOpen(t, u, url+"/orders")

	// Only thresholds (and the body) change: the breaker stays open.
	redistest.Push(t, c, key, channel, "orders", "failure_threshold", "10", "body", "still open")
	testcaddy.Eventually(t, 10*time.Second, "new body in force", func() bool {
		code, b := body("/orders")
		return code == 503 && b == "still open"
	})
	expectOpen(t, u, url+"/orders")

	// /checkout has no binding: it passes. Bound to orders, it shares
	// that breaker, which is open.
	if code, _ := body("/checkout"); code != 200 {
		t.Fatalf("unbound route got %d", code)
	}
	redistest.Push(t, c, "gateway:binding:checkout", "gateway:rules:binding", "checkout", "circuit_breaker", "orders")
	testcaddy.Eventually(t, 10*time.Second, "checkout bound to orders", func() bool {
		code, b := body("/checkout")
		return code == 503 && b == "still open"
	})
}
