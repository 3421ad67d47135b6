package ratelimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// multiRules declares two rules whose tokens never come back during a
// test: burst_api (20) and daily_api (8), both for every request (global).
const multiRules = `	rulestore {
		rate_limit burst_api {
			qps 0.0001
			burst 20
			key_resolver global
		}
		rate_limit daily_api {
			qps 0.0001
			burst 8
			key_resolver global
		}
	}`

// Two rules on one route, a per-second-style burst of 20 and a quota of 8:
// the first 8 requests pass and spend on both, each reporting the most
// restrictive (daily_api, fewest left) in X-RateLimit-*, what is left of
// each in RateLimit, and both policies in RateLimit-Policy. The next 5 are refused by the
// second rule with its Retry-After, and the tokens the first rule took for
// them are given back (the same rules the other way round refuse at the
// first, not consulting the second): burst_api alone (another route, same rule id) then
// has exactly 20 - 8 left.
func TestSeveralLimitsRefundTheFirst(t *testing.T) {
	s := caddyfile(t, multiRules,
		"\tratelimit burst_api daily_api\n\trespond \"ok\"",
		"\tratelimit burst_api\n\trespond \"ok\"",
		"\tratelimit daily_api\n\trespond \"ok\"",
		"\tratelimit daily_api burst_api\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	// The single-rule routes' policies, before any token is spent there.
	burstPolicy, dailyPolicy := policyOf(t, s.urls[1]), policyOf(t, s.urls[2])
	if burstPolicy != `"burst_api";q=20;w=200000` || dailyPolicy != `"daily_api";q=8;w=80000` {
		t.Fatalf("policies %q %q", burstPolicy, dailyPolicy)
	}
	// Those probes spent one token of each: 19 and 7 left.
	for i := 0; i < 7; i++ {
		resp, _ := testcaddy.Get(t, s.urls[0])
		left := strconv.Itoa(6 - i)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != left ||
			resp.Header.Get("X-RateLimit-Limit") != "8" {
			t.Fatalf("request %d: %d remaining %q limit %q, want 200 with %s of 8 left", i+1, resp.StatusCode,
				resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("X-RateLimit-Limit"), left)
		}
		// RateLimit: what is left of each rule, in the list's order.
		if rl := resp.Header.Get("RateLimit"); !remainingItems(rl, "burst_api", strconv.Itoa(18-i), "daily_api", left) {
			t.Fatalf("request %d: RateLimit %q, want burst_api's r=%d and daily_api's r=%s", i+1, rl, 18-i, left)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), burstPolicy+", "+dailyPolicy; got != want {
			t.Fatalf("request %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
	}
	for i := 0; i < 5; i++ {
		resp, _ := testcaddy.Get(t, s.urls[0])
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("refused request %d: %d, want 429", i+1, resp.StatusCode)
		}
		// daily_api's one token comes back in 1/0.0001 s.
		if ra := resp.Header.Get("Retry-After"); ra != "10000" {
			t.Fatalf("refused request %d: Retry-After %q, want daily_api's 10000", i+1, ra)
		}
		// burst_api's token for this request was given back: 12 left.
		if rl := resp.Header.Get("RateLimit"); !remainingItems(rl, "burst_api", "12", "daily_api", "0") || !strings.HasSuffix(rl, `"daily_api";r=0;t=80000`) {
			t.Fatalf("refused request %d: RateLimit %q, want burst_api's r=12 and daily_api's r=0;t=80000", i+1, rl)
		}
	}
	// The rules the other way round: daily_api refuses first, burst_api is
	// not consulted, and the policy still lists both, in the list's order.
	resp, _ := testcaddy.Get(t, s.urls[3])
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("RateLimit") != `"daily_api";r=0;t=80000` ||
		resp.Header.Get("RateLimit-Policy") != dailyPolicy+", "+burstPolicy {
		t.Fatalf("daily_api first: %d RateLimit %q RateLimit-Policy %q", resp.StatusCode,
			resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
	}
	// burst_api: 20 - 1 probe - 7 admitted, none for the 6 refused, and
	// this request's own token: 11.
	resp, _ = testcaddy.Get(t, s.urls[1])
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != "11" {
		t.Fatalf("burst_api alone: %d remaining %q, want 200 with 11 (nothing leaked to the refused requests)",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

// remainingItems reports whether a RateLimit list holds exactly the items
// of the rules given as id, remaining pairs, in that order.
func remainingItems(rl string, idLeft ...string) bool {
	items := strings.Split(rl, ", ")
	if len(items) != len(idLeft)/2 {
		return false
	}
	for i, item := range items {
		if !strings.HasPrefix(item, `"`+idLeft[2*i]+`";r=`+idLeft[2*i+1]+";t=") {
			return false
		}
	}
	return true
}

func policyOf(t *testing.T, url string) string {
	t.Helper()
	resp, _ := testcaddy.Get(t, url)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", url, resp.StatusCode)
	}
	return resp.Header.Get("RateLimit-Policy")
}

// concurrentOK sends n requests at once and counts the 200s; any status
// but 200 and 429 fails the test.
func concurrentOK(t *testing.T, n int, urlOf func(i int) string) int {
	t.Helper()
	var ok atomic.Int64
	return concurrentOKCounted(t, n, func(i int) (string, *atomic.Int64) { return urlOf(i), &ok })
}

// concurrentOKCounted is concurrentOK counting each request's 200 also in
// the counter urlOf gives with its URL.
func concurrentOKCounted(t *testing.T, n int, urlOf func(i int) (string, *atomic.Int64)) int {
	t.Helper()
	var ok, other atomic.Int64
	var wg sync.WaitGroup
	var firstOther atomic.Value
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			u, counter := urlOf(i)
			resp, err := http.Get(u)
			if err != nil {
				other.Add(1)
				firstOther.CompareAndSwap(nil, err.Error())
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
				counter.Add(1)
			case http.StatusTooManyRequests:
			default:
				other.Add(1)
				firstOther.CompareAndSwap(nil, resp.Status)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if other.Load() != 0 {
		t.Fatalf("%d of %d requests failed or answered neither 200 nor 429 (first: %v)", other.Load(), n, firstOther.Load())
	}
	return int(ok.Load())
}

// 32 concurrent requests on a route limited by a burst of 10 and a quota
// of 8 (inline rules): exactly 8 pass, and the first rule ends with
// exactly 10 - 8 left: every token taken for a request the second refused
// came back.
func TestSeveralLimitsConcurrentNoLeak(t *testing.T) {
	s := caddyfile(t, "",
		`	ratelimit {
		limit first {
			qps 0.0001
			burst 10
			key_resolver global
		}
		limit second {
			qps 0.0001
			burst 8
			key_resolver global
		}
	}
	respond "ok"`,
		`	ratelimit {
		id first
		qps 0.0001
		burst 10
		key_resolver global
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	if got := concurrentOK(t, 32, func(int) string { return s.urls[0] }); got != 8 {
		t.Fatalf("admitted %d of 32, want exactly 8 (the second rule's quota)", got)
	}
	resp, _ := testcaddy.Get(t, s.urls[1])
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("first alone: %d remaining %q, want 200 with 10 - 8 - 1 = 1",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

// Each rule of a list settles by the response as it does alone: failures
// (count_status 5xx, 3 of them) is charged only by the 500s, all (every
// request) by every admitted one. Once failures is spent, its refusals
// give all's token back; and a rule's in-flight cap holds a slot per
// admitted request (freed when it ends: the sequential requests never
// see the cap of 1).
func TestSeveralLimitsSettleEachRule(t *testing.T) {
	const all = `qps 0.0001
			burst 100
			key_resolver global
			max_concurrent 1`
	s := caddyfile(t, "",
		`	ratelimit {
		limit failures {
			qps 0.0001
			burst 3
			key_resolver global
			count_status 5xx
		}
		limit all {
			`+all+`
		}
	}
	respond /fail "boom" 500
	respond "ok"`,
		"\tratelimit {\n\t\tid all\n\t\t"+all+"\n\t}\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	// 5 successes spend all only; 3 failures spend both; then failures
	// refuses (a 200 or a 500 alike), 4 times.
	expect(t, s.urls[0], []int{200, 200, 200, 200, 200})
	expect(t, s.urls[0]+"/fail", []int{500, 500, 500})
	expect(t, s.urls[0], []int{429, 429})
	expect(t, s.urls[0]+"/fail", []int{429, 429})
	resp, _ := testcaddy.Get(t, s.urls[1])
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != "91" {
		t.Fatalf("all alone: %d remaining %q, want 200 with 100 - 8 - 1 = 91 (the 4 refused spent nothing)",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}

// A rule charged by response_cost among several settles by the upstream's
// report as it does alone, a header or a trailer, beside a count_status
// rule: tokens takes its reserve of 10 at admission, is charged 20 more
// for a report of 30, refunded 5 for a trailer of 5 (100 - 30 - 5 = 65),
// and the next request there, alone, leaves 55; errors (5xx only) spent
// nothing on these 200s.
func TestSeveralLimitsResponseCost(t *testing.T) {
	const tokens = `qps 0.0001
			burst 100
			key_resolver global
			response_cost {http.response.header.X-Tokens-Used}
			reserve 10
			max_cost 50`
	up := usageUpstream(t)
	s := caddyfile(t, "",
		`	ratelimit {
		limit errors {
			qps 0.0001
			burst 3
			key_resolver global
			count_status 5xx
		}
		limit tokens {
			`+tokens+`
		}
	}
	reverse_proxy `+up.URL,
		"\tratelimit {\n\t\tid tokens\n\t\t"+tokens+"\n\t}\n\treverse_proxy "+up.URL,
		"\tratelimit {\n\t\tid errors\n\t\tqps 0.0001\n\t\tburst 3\n\t\tkey_resolver global\n\t\tcount_status 5xx\n\t}\n\trespond \"ok\"")
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0]+"/use?n=30", []int{200})
	resp, body := testcaddy.Get(t, s.urls[0]+"/stream?n=5")
	if resp.StatusCode != http.StatusOK || resp.Trailer.Get("X-Tokens-Used") != "5" {
		t.Fatalf("stream: %d %q, trailer %v", resp.StatusCode, body, resp.Trailer)
	}
	for i, want := range []string{"55", "3"} { // tokens alone; errors alone
		resp, _ := testcaddy.Get(t, s.urls[1+i])
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Remaining") != want {
			t.Fatalf("%s: %d remaining %q, want 200 with %s", s.urls[1+i], resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
}
