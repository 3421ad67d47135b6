package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The overshoot bound of docs/ratelimit-quotas.md ("Cost from the response"): a
// key spends beyond its quota at most in-flight × (max_cost − reserve).
// The tests hit it exactly: a quota of 64 reserves, 64 requests in flight
// at once (the upstream answers none before all 64 arrived), each
// reporting max_cost. A 65th request sent with them is refused up front.
const (
	boundInFlight = 64
	boundReserve  = 10
	boundMaxCost  = 100
	boundQPS      = 0.1 // slow enough that the test's own duration refills little
	boundBurst    = boundInFlight * boundReserve
	boundDebt     = boundInFlight * (boundMaxCost - boundReserve) // 5760 tokens
)

const boundSite = `
	ratelimit {
		qps %v
		burst %d
		key_resolver global
		response_cost {http.response.header.X-Tokens-Used}
		reserve %d
		max_cost %d
		%s
	}
	reverse_proxy %s`

// barrierUpstream holds every request until n have arrived (or a minute
// passed: the test then fails on the count), then reports max_cost each.
func barrierUpstream(t *testing.T, n int) (*httptest.Server, func() int) {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(time.Minute):
		}
		w.Header().Set("X-Tokens-Used", strconv.Itoa(boundMaxCost))
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(up.Close)
	return up, func() int { mu.Lock(); defer mu.Unlock(); return arrived }
}

// sendAtOnce sends one request to each url concurrently and returns the
// statuses counted.
func sendAtOnce(t *testing.T, urls []string) map[int]int {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(urls), MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for _, u := range urls {
		wg.Add(1)
		go func(u string) {
			defer wg.Done()
			code := -1
			if resp, err := client.Get(u); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			counts[code]++
			mu.Unlock()
		}(u)
	}
	wg.Wait()
	return counts
}

// checkDebt asserts the key owes exactly the bound: the next request waits
// for the debt plus its reserve to refill, less what refilled since.
func checkDebt(t *testing.T, url string, started time.Time) {
	t.Helper()
	resp, _ := testcaddy.Get(t, url)
	elapsed := time.Since(started).Seconds()
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || err != nil {
		t.Fatalf("after the burst: %d Retry-After %q, want 429 with the debt's wait", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	want := float64(boundDebt+boundReserve) / boundQPS // with nothing refilled
	if got := float64(ra); got > want+1 || got < want-elapsed-1 {
		t.Fatalf("Retry-After %d s, want %.0f s less the %.1f s the test took: the key owes %d tokens, the stated bound",
			ra, want, elapsed, boundDebt)
	}
}

func TestResponseCostOvershootBoundLocal(t *testing.T) {
	up, arrived := barrierUpstream(t, boundInFlight)
	s := caddyfile(t, "", fmt.Sprintf(boundSite, boundQPS, boundBurst, boundReserve, boundMaxCost, "", up.URL))
	testcaddy.Run(t, s.cfg)
	started := time.Now()
	urls := make([]string, boundInFlight+1)
	for i := range urls {
		urls[i] = s.urls[0] + "/"
	}
	if got := sendAtOnce(t, urls); got[200] != boundInFlight || got[429] != 1 {
		t.Fatalf("%d requests at once: statuses %v (upstream saw %d), want %d admitted and 1 refused", len(urls), got, arrived(), boundInFlight)
	}
	checkDebt(t, s.urls[0], started)
}

// Two Caddy processes sharing the key in Redis: the same bound in total.
func TestResponseCostOvershootBoundCluster(t *testing.T) {
	rd := redistest.Start(t)
	up, arrived := barrierUpstream(t, boundInFlight)
	site := fmt.Sprintf(boundSite, boundQPS, boundBurst, boundReserve, boundMaxCost,
		"scope cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny", up.URL)
	p, q := ports(t, 1), ports(t, 1)
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, site))
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), q, site))
	started := time.Now()
	urls := make([]string, boundInFlight+1)
	for i := range urls {
		urls[i] = url(p[0]) + "/"
		if i%2 == 1 {
			urls[i] = url(q[0]) + "/"
		}
	}
	if got := sendAtOnce(t, urls); got[200] != boundInFlight || got[429] != 1 {
		t.Fatalf("%d requests at once over two instances: statuses %v (upstream saw %d), want %d admitted and 1 refused", len(urls), got, arrived(), boundInFlight)
	}
	checkDebt(t, url(p[0]), started)
	checkDebt(t, url(q[0]), started)
}
