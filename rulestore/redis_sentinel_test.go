package rulestore_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestRulesThroughSentinel runs the built Caddy with only a Sentinel's
// address and the master's name (the Sentinel requires a password): the
// store asks the Sentinel where the master is, and rules pushed to that
// master reach Caddy.
func TestRulesThroughSentinel(t *testing.T) {
	master := redistest.Start(t)
	s := redistest.StartSentinel(t, master, "gwmaster", "requirepass sentinel-pw")
	site := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis {
			addrs             %s
			master_name       gwmaster
			sentinel_password sentinel-pw
		}
		rate_limit order_api {
			qps          1000
			key_resolver global
		}
	}
}
http://127.0.0.1:%d {
	ratelimit order_api
	respond "ok"
}`, s.Addr, site))
	url := fmt.Sprintf("http://127.0.0.1:%d/", site)
	if got := admitted(t, url, 5); got != 5 {
		t.Fatalf("static rule (1000 qps): %d of 5 admitted", got)
	}
	redistest.Push(t, master.Client(), "rate_limit:rule:order_api", "gateway:rules:rate_limit", "order_api",
		"qps", "0.001", "burst", "2", "key_resolver", "global")
	// 20s: resolving the master and loading take well under a second; the
	// margin is for a busy 2-core machine.
	testcaddy.Eventually(t, 20*time.Second, "the rule pushed to the Sentinel's master rejects", func() bool {
		resp, _ := testcaddy.Get(t, url)
		return resp.StatusCode == http.StatusTooManyRequests
	})
	if strings.Contains(p.Logs(), "redis unavailable") {
		t.Fatalf("the store lost Redis on the way:\n%s", p.Logs())
	}
}
