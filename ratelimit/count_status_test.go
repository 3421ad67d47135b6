package ratelimit_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// loginUpstream answers 200 for the password "right" and 401 otherwise,
// counting the requests that reach it.
func loginUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Password") != "right" {
			http.Error(w, "wrong password", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("welcome"))
	}))
	t.Cleanup(up.Close)
	return up, &hits
}

const countStatusSite = `
	ratelimit {
		qps 0.001
		burst 3
		key_resolver {http.request.header.X-User}
		count_status %s
		%s
	}
	reverse_proxy %s`

// checkCountStatus: successes are free; three failures spend the key's
// three tokens; then every request of that key, right password or not, is
// refused before the upstream; another key is untouched.
func checkCountStatus(t *testing.T, url string, hits *atomic.Int64) {
	t.Helper()
	right, wrong := "X-Password: right", "X-Password: wrong"
	alice := "X-User: alice"
	for i := 0; i < 10; i++ {
		resp, body := testcaddy.Get(t, url, alice, right)
		if resp.StatusCode != 200 || body != "welcome" {
			t.Fatalf("success %d: %d %q, want 200: successes are free", i+1, resp.StatusCode, body)
		}
	}
	for i := 0; i < 3; i++ {
		if got := status(t, url, alice, wrong); got != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want the upstream's 401", i+1, got)
		}
	}
	before := hits.Load()
	for _, pw := range []string{right, wrong, right} {
		resp, body := testcaddy.Get(t, url, alice, pw)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "rate_limited") {
			t.Fatalf("after 3 failures (%s): %d %q, want 429", pw, resp.StatusCode, body)
		}
		if ra := resp.Header.Get("Retry-After"); ra == "" {
			t.Fatal("no Retry-After on the refusal")
		}
	}
	if n := hits.Load() - before; n != 0 {
		t.Fatalf("%d refused requests reached the upstream, want 0", n)
	}
	if got := status(t, url, "X-User: bob", wrong); got != http.StatusUnauthorized {
		t.Fatalf("bob: %d, want 401 (his own quota)", got)
	}
	if got := status(t, url, "X-User: bob", right); got != http.StatusOK {
		t.Fatalf("bob: %d, want 200", got)
	}
}

func TestCountStatusOnlyFailuresSpend(t *testing.T) {
	for _, set := range []string{"401 403", "4xx", "400-499"} {
		t.Run(strings.ReplaceAll(set, " ", ","), func(t *testing.T) {
			up, hits := loginUpstream(t)
			s := caddyfile(t, "", fmt.Sprintf(countStatusSite, set, "", up.URL))
			testcaddy.Run(t, s.cfg)
			checkCountStatus(t, s.urls[0], hits)
		})
	}
}

// A status the handler chain answers with an error (here Caddy's error
// directive) counts by the status Caddy answers; a sliding window rule
// counts the same way.
func TestCountStatusOfHandlerErrors(t *testing.T) {
	s := caddyfile(t, "", `
	ratelimit {
		limit_type sliding_window
		qps 0.01
		window_size 200
		key_resolver global
		count_status 403
	}
	error /forbidden 403
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200, 200, 200})
	expect(t, s.urls[0]+"/forbidden", []int{403, 403})
	expect(t, s.urls[0], []int{429})
	expect(t, s.urls[0]+"/forbidden", []int{429})
}

// With scope cluster the failures are charged to the key's state in Redis
// (read back here: alice's bucket empty, bob's down by his one failure).
func TestCountStatusCluster(t *testing.T) {
	rd := redistest.Start(t)
	up, hits := loginUpstream(t)
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		fmt.Sprintf(countStatusSite, "401", "scope cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny", up.URL))
	testcaddy.Run(t, s.cfg)
	checkCountStatus(t, s.urls[0], hits)
	tokens := func(user string) float64 {
		n, ok := redisTokens(rd, "ratelimit:tb2:{inline:*:"+user+"}")
		if !ok {
			t.Fatalf("%s: no bucket in redis", user)
		}
		return n
	}
	// 0.001 tokens/s refill a few thousandths during the test.
	if n := tokens("alice"); n < 0 || n > 0.1 {
		t.Errorf("alice's tokens in redis %g, want about 0 (three failures of three)", n)
	}
	if n := tokens("bob"); n < 2 || n > 2.1 {
		t.Errorf("bob's tokens in redis %g, want about 2 (one failure; his success free)", n)
	}
}

// The overshoot bound of a counted outcome: with max_concurrent m, a key
// spends at most (quota − cost) + m × cost before a charge refuses it.
// Here quota 2, cost 1, m 4: one failure, then four failures held in the
// upstream at once (all admitted: the key still holds a token), 60 more
// refused by the in-flight cap meanwhile; the four charges take the key
// into debt, 5 failures in all, exactly the bound, then refusals. Locally
// and with scope cluster.
func TestCountStatusOvershootBound(t *testing.T) {
	for _, scope := range []string{"local", "cluster"} {
		t.Run(scope, func(t *testing.T) {
			global := ""
			if scope == "cluster" {
				rd := redistest.Start(t)
				global = "\trulestore {\n\t\tredis " + rd.URL() + "\n\t}"
				scope = "cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny"
			}
			var hits atomic.Int64
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) > 1 {
					<-release
				}
				http.Error(w, "wrong password", http.StatusUnauthorized)
			}))
			t.Cleanup(up.Close)
			s := caddyfile(t, global, fmt.Sprintf(`
	ratelimit {
		qps 0.001
		burst 2
		key_resolver global
		count_status 401
		max_concurrent 4
		scope %s
	}
	reverse_proxy %s`, scope, up.URL))
			testcaddy.Run(t, s.cfg)
			expect(t, s.urls[0], []int{401})
			var codes [64]int
			var wg sync.WaitGroup
			var done atomic.Int64
			for i := range codes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i] = status(t, s.urls[0])
					done.Add(1)
				}()
			}
			testcaddy.Eventually(t, 20*time.Second, "4 held in the upstream, 60 refused", func() bool {
				return hits.Load() == 5 && done.Load() == 60
			})
			close(release)
			wg.Wait()
			n401, n429 := 0, 0
			for _, c := range codes {
				switch c {
				case 401:
					n401++
				case 429:
					n429++
				}
			}
			if n401 != 4 || n429 != 60 {
				t.Fatalf("64 at once: %d 401s and %d 429s, want 4 and 60 (max_concurrent 4)", n401, n429)
			}
			// 5 failures spent of a quota of 2: the bound (2 − 1) + 4 × 1.
			// The key owes 3 tokens, so the next request waits for 4.
			resp, _ := testcaddy.Get(t, s.urls[0])
			if resp.StatusCode != 429 {
				t.Fatalf("after the bound: %d, want 429", resp.StatusCode)
			}
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if ra < 3900 || ra > 4000 {
				t.Errorf("Retry-After %d, want about 4000 s (3 owed + 1 at 0.001/s)", ra)
			}
			if n := hits.Load(); n != 5 {
				t.Fatalf("%d requests reached the upstream, want 5", n)
			}
		})
	}
}

// redisTokens reads the tokens of the one token bucket state in Redis
// matching pattern (packed '<dd': last update, tokens).
func redisTokens(rd *redistest.Server, pattern string) (float64, bool) {
	keys := rd.Client().Keys(context.Background(), pattern).Val()
	if len(keys) != 1 {
		return 0, false
	}
	v := []byte(rd.Client().Get(context.Background(), keys[0]).Val())
	if len(v) != 16 {
		return 0, false
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(v[8:])), true
}
