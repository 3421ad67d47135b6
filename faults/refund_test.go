package faults_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// refundCaddyfile: a cluster calendar quota of 10 a day, each request
// reserving all 10 and settled by the upstream's report.
func refundCaddyfile(redisURL string, port int, upstream string) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
	}
}
http://127.0.0.1:%d {
	ratelimit {
		id            refund_day
		quota         10
		period        day
		key_resolver  global
		scope         cluster
		redis_timeout 2s
		on_redis_error deny
		response_cost {http.response.header.X-Tokens-Used}
		reserve       10
		max_cost      10
	}
	reverse_proxy %s
}
`, redisURL, port, upstream)
}

// TestClusterRefusalSeesRefundElsewhere: instance A holds the day's whole
// quota as a request's reserve; instance B refuses the key (Retry-After:
// the rest of the day). A's request costs nothing and is refunded: B
// admits the key again within a few seconds, not at midnight.
func TestClusterRefusalSeesRefundElsewhere(t *testing.T) {
	r := redistest.Start(t)
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/hold" {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		w.Header().Set("X-Tokens-Used", "0")
	}))
	t.Cleanup(up.Close)
	portA, portB := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Start(t, refundCaddyfile(r.URL(), portA, up.URL))
	testcaddy.Start(t, refundCaddyfile(r.URL(), portB, up.URL))
	urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d", portA), fmt.Sprintf("http://127.0.0.1:%d", portB)

	held := make(chan int, 1)
	go func() {
		resp, err := http.Get(urlA + "/hold")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	// A's request holds the day's quota in Redis (on_redis_error deny: an
	// admitted request was admitted by Redis); B is refused.
	select {
	case <-arrived:
	case code := <-held:
		t.Fatalf("A's request to hold the quota ended first: %d", code)
	case <-time.After(20 * time.Second):
		t.Fatal("A's request to hold the quota never reached the upstream")
	}
	var retry int
	testcaddy.Eventually(t, 20*time.Second, "B refused while A holds the quota", func() bool {
		resp, _ := testcaddy.Get(t, urlB+"/")
		retry, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
		return resp.StatusCode == http.StatusTooManyRequests
	})
	if retry < 60 {
		t.Fatalf("B's refusal says Retry-After %d s, want the rest of the day", retry)
	}
	close(release)
	if code := <-held; code != http.StatusOK {
		t.Fatalf("A's held request: %d", code)
	}
	refunded := time.Now()
	// Within a few seconds B sees the refund (the remembered refusal lasts
	// at most a second); before, it refused until midnight.
	testcaddy.Eventually(t, 10*time.Second, "B admits the key after A's refund", func() bool {
		resp, _ := testcaddy.Get(t, urlB+"/")
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("B admitted %v after A's refund (within the 10 s deadline)", time.Since(refunded).Round(time.Millisecond))
}
