package ratelimit_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// pacedLoad runs clients closed-loop clients for d, spread over urls, and
// returns the statuses seen, whether every refusal carried a Retry-After,
// and the time from the first request's start to the last one's end.
func pacedLoad(t *testing.T, urls []string, clients int, d time.Duration) (admitted, refused int, retryOK bool, elapsed time.Duration) {
	t.Helper()
	var mu sync.Mutex
	retryOK = true
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				resp, _ := testcaddy.Get(t, urls[c%len(urls)])
				mu.Lock()
				switch resp.StatusCode {
				case 200:
					admitted++
				case 429:
					refused++
					if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
						retryOK = false
					}
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return admitted, refused, retryOK, time.Since(start)
}

// Two Caddy processes share one paced cluster rule of 50 qps: the slots
// are reserved in Redis, so the fleet admits at the rule's rate, not twice
// it. Light load (4 clients: at most 4 slots reserved ahead, 80 ms, under
// max_queue_wait 200ms) is never refused; a flood is, with Retry-After.
func TestClusterPaceSharedByTwoCaddys(t *testing.T) {
	rd := redistest.Start(t)
	p, q := ports(t, 1), ports(t, 1)
	site := `
	ratelimit {
		qps 50
		key_resolver global
		scope cluster
		control_behavior pace
		max_queue_wait 200ms
		redis_timeout 1s
	}
	respond "ok"`
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), p, site))
	testcaddy.Start(t, fleetConfig(t, "redis "+rd.URL(), q, site))
	urls := []string{url(p[0]), url(q[0])}

	const qps, maxWait = 50, 200 * time.Millisecond
	// Every slot is reserved by a script run between the first request's
	// start and the last one's end, and lies within max_queue_wait of it;
	// slots are 1/qps apart from the first. So the fleet admits at most
	// (elapsed + max_queue_wait) × qps + 1. +2 covers the µs rounding of
	// the schedule and of Redis TIME against this clock.
	bound := func(elapsed time.Duration) int {
		return int((elapsed+maxWait).Seconds()*qps) + 1 + 2
	}
	admitted, refused, _, elapsed := pacedLoad(t, urls, 4, time.Second)
	t.Logf("light: admitted %d refused %d in %v", admitted, refused, elapsed)
	if refused != 0 {
		t.Errorf("light load: %d refused, want none (never more than 4 slots ahead, within max_queue_wait)", refused)
	}
	if admitted > bound(elapsed) {
		t.Errorf("light load: admitted %d in %v, more than %d", admitted, elapsed, bound(elapsed))
	}

	admitted, refused, retryOK, elapsed := pacedLoad(t, urls, 40, 1500*time.Millisecond)
	t.Logf("flood: admitted %d refused %d in %v (bound %d; paced per instance it would be about %d)", admitted, refused, elapsed, bound(elapsed), int(2*elapsed.Seconds()*qps))
	if admitted > bound(elapsed) {
		t.Errorf("flood: admitted %d in %v across both instances, more than %d", admitted, elapsed, bound(elapsed))
	}
	if refused == 0 || !retryOK {
		t.Errorf("flood: refused %d (want some), all with Retry-After >= 1: %v", refused, retryOK)
	}
}

// A paced cluster rule with Redis killed: allow lets requests through at
// once without rate headers, deny answers its status, local paces with the
// local pacer (this instance's share): the same as with Redis up, 2 of 4
// concurrent requests admitted (slots 0 and 1 s; 2 s is beyond
// max_queue_wait 1500ms), the second after waiting for its slot.
func TestClusterPaceRedisFailureModes(t *testing.T) {
	rd := redistest.Start(t)
	site := `
	ratelimit {
		qps 1
		key_resolver {http.request.header.X-K}
		scope cluster
		control_behavior pace
		max_queue_wait 1500ms
		on_redis_error %s
		redis_timeout 150ms
	}
	respond "{http.ratelimit.queue_wait}"`
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		fmt.Sprintf(site, "allow"), fmt.Sprintf(site, "deny 503"), fmt.Sprintf(site, "local"))
	allow, deny, local := s.urls[0], s.urls[1], s.urls[2]
	testcaddy.Run(t, s.cfg)

	burst := func(u, key string) (codes map[int]int, waited int, retryOK bool) {
		codes, retryOK = map[int]int{}, true
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, body := testcaddy.Get(t, u, "X-K: "+key)
				mu.Lock()
				defer mu.Unlock()
				codes[resp.StatusCode]++
				if w, err := time.ParseDuration(body); err == nil && w > 0 {
					waited++
				}
				if resp.StatusCode != 200 && resp.Header.Get("Retry-After") == "" {
					retryOK = false
				}
			}()
		}
		wg.Wait()
		return codes, waited, retryOK
	}
	paced := func(phase, u string) {
		t.Helper()
		codes, waited, retryOK := burst(u, phase)
		if codes[200] != 2 || codes[429] != 2 || waited != 1 || !retryOK {
			t.Fatalf("%s %s: statuses %v, %d waited, Retry-After on refusals %v; want 2×200 (1 waited) and 2×429 with Retry-After", phase, u, codes, waited, retryOK)
		}
	}
	paced("up", local)

	rd.Kill()
	codes, waited, _ := burst(allow, "killed")
	if codes[200] != 4 || waited != 0 {
		t.Fatalf("allow: statuses %v, %d waited; want 4×200 at once", codes, waited)
	}
	resp, body := testcaddy.Get(t, deny, "X-K: killed")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("deny: %d %q, want 503 with Retry-After 1", resp.StatusCode, body)
	}
	paced("killed", local)

	rd.Restart()
	testcaddy.Eventually(t, 5*time.Second, "redis in use again", func() bool {
		return status(t, deny, "X-K: probe") == 200
	})
	paced("restarted", local)
}
