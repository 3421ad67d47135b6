package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestLLMGateway: examples/llm-gateway in front of examples/upstream's
// /v1/chat/completions, with the Caddyfile's real numbers (60 requests a
// minute, 100,000 tokens a UTC day, reserve 500, max_cost 4,000, 4 in
// flight per key), then with scope cluster from rules.sh.
func TestLLMGateway(t *testing.T) {
	// A UTC day must not end while the test runs: within a minute of
	// midnight, wait for it to pass.
	if d := time.Until(nextUTCMidnight()); d < time.Minute {
		t.Logf("waiting %v for UTC midnight to pass", d.Round(time.Second))
		time.Sleep(d + time.Second) // sleep: until the wall clock passes midnight, nothing to wait on
	}
	s := startScenario(t, "llm-gateway")
	// Streams of more than one chunk (50 words) are held open for a
	// minute; one chunk streams at once.
	startUpstream(t, s.port[9001], "-token-delay", "1m")
	g := &llmGateway{t: t, url: s.gateway + "/v1/chat/completions"}

	// No key, or not in the exact form "Bearer <token>": 401 before any
	// limit.
	for _, auth := range []string{"", "bearer k1", "Bearer  k1", "Basic a2V5Og=="} {
		resp, body := g.chat(auth, 1, false)
		if resp.StatusCode != 401 || body != `{"error":"missing_api_key"}` || resp.Header.Get("WWW-Authenticate") != "Bearer" ||
			resp.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("Authorization %q: %d %q %v, want 401 missing_api_key", auth, resp.StatusCode, body, resp.Header)
		}
	}

	// (1) 60 requests a minute per key: the 61st is refused by
	// llm_requests; another key is not affected.
	clearOfMinuteBoundary(t)
	for i := 1; i <= 60; i++ {
		if resp, body := g.chat("Bearer alice", 1, false); resp.StatusCode != 200 {
			t.Fatalf("alice's request %d: %d %q, want 200", i, resp.StatusCode, body)
		}
	}
	resp, body := g.chat("Bearer alice", 1, false)
	if resp.StatusCode != 429 || !strings.Contains(body, `"rule":"llm_requests"`) ||
		resp.Header.Get("RateLimit-Policy") != llmPolicies || resp.Header.Get("X-RateLimit-Remaining") != "0" ||
		!strings.HasPrefix(resp.Header.Get("RateLimit"), `"llm_requests";r=0;t=`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("alice's 61st request: %d %q %v, want 429 from llm_requests", resp.StatusCode, body, resp.Header)
	}
	if resp, body := g.chat("Bearer bob", 1, false); resp.StatusCode != 200 {
		t.Fatalf("bob after alice's 61: %d %q, want 200", resp.StatusCode, body)
	}

	// (2) The day's budget: each admitted request shows the budget less
	// its reserve in RateLimit (X-RateLimit-* are the per-minute limit's,
	// the fewer left); the upstream reports 4,000 tokens (the 25th 9,000,
	// clipped to max_cost 4,000), so 25 answers spend all 100,000.
	for i := 1; i <= 25; i++ {
		n := 4000
		if i == 25 {
			n = 9000
		}
		resp, body := g.chat("Bearer carol", n, false)
		want := strconv.Itoa(100000 - 4000*(i-1) - 500)
		if resp.StatusCode != 200 || tokensLeft(resp) != want || resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(60-i) {
			t.Fatalf("carol's request %d: %d RateLimit %q X-RateLimit-Remaining %q, want 200 with %s tokens and %d requests left",
				i, resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("X-RateLimit-Remaining"), want, 60-i)
		}
		if u := usage(t, body); u != n || resp.Header.Get("X-Tokens-Used") != strconv.Itoa(n) {
			t.Fatalf("carol's request %d: usage %d, X-Tokens-Used %q, want %d", i, u, resp.Header.Get("X-Tokens-Used"), n)
		}
	}
	g.refusedForTheDay("Bearer carol")

	// (3) A streamed answer is charged its trailer: 50 tokens, after its
	// reserve of 500 was taken.
	g.remaining("Bearer dave", 100, 99500) // then charged 100: 99,900
	resp, body = g.chat("Bearer dave", 50, true)
	if resp.StatusCode != 200 || tokensLeft(resp) != "99400" {
		t.Fatalf("dave's stream: %d RateLimit %q, want 200 with 99400 tokens left", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Trailer.Get("X-Tokens-Used") != "50" ||
		!strings.HasPrefix(body, "data: {") || !strings.Contains(body, `"total_tokens":50`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("dave's stream: %v trailer %v body %q", resp.Header, resp.Trailer, body)
	}
	g.remaining("Bearer dave", 0, 99350) // 99,900 - 50, less this reserve

	// (4) Debt: with 2,000 left, an answer reporting 4,000 is charged in
	// full; the key owes 2,000 and is refused until the day ends.
	for i := 1; i <= 24; i++ {
		if resp, body := g.chat("Bearer frank", 4000, false); resp.StatusCode != 200 {
			t.Fatalf("frank's request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	g.remaining("Bearer frank", 2000, 3500) // 98,000 spent
	g.remaining("Bearer frank", 4000, 1500) // 102,000 spent: 2,000 in debt
	g.refusedForTheDay("Bearer frank")

	// In flight: 4 streams of a key at once; the 5th is refused without
	// touching the budget. The 4 held streams, cut off before their
	// trailer, are charged max_cost (4,000 each): hanging up never costs
	// less than finishing.
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := 0; i < 4; i++ {
		cancels = append(cancels, g.holdStream("Bearer erin"))
	}
	g.inFlight(s, 4)
	resp, body = g.chat("Bearer erin", 1, false)
	// llm_tokens did not consult the budget, and the request is not one
	// of the 60: the quota headers are llm_requests's, 4 of 60 spent.
	if resp.StatusCode != 429 || body != `{"error":"too_many_in_flight","rule":"llm_tokens","retry_after":1}` ||
		resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-RateLimit-Remaining") != "56" ||
		resp.Header.Get("RateLimit-Policy") != llmPolicies || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"llm_requests";r=56;t=`) {
		t.Fatalf("erin's 5th at once: %d %q %v, want 429 too_many_in_flight with llm_requests's headers", resp.StatusCode, body, resp.Header)
	}
	for _, c := range cancels {
		c()
	}
	g.inFlight(s, 0)
	g.remaining("Bearer erin", 0, 83500) // 4 cut streams of 4,000, less this reserve

	// Scope cluster (rules.sh): the same contract, counted in Redis.
	s.rulesSh(t)
	s.waitRule(t, "rate_limit/llm_requests", `"scope":"cluster"`)
	s.waitRule(t, "rate_limit/llm_tokens", `"scope":"cluster"`)
	clearOfMinuteBoundary(t)
	g.remaining("Bearer grace", 4000, 99500)
	resp, _ = g.chat("Bearer grace", 50, true)
	if resp.StatusCode != 200 || tokensLeft(resp) != "95500" || resp.Trailer.Get("X-Tokens-Used") != "50" {
		t.Fatalf("grace's stream (scope cluster): %d RateLimit %q trailer %v", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Trailer)
	}
	// The stream's settlement (-450) may ride in the next batch to Redis.
	// The day's count is the string the README names.
	day := nextUTCMidnight().Add(-24 * time.Hour).Unix()
	dayKey := fmt.Sprintf("ratelimit:cq:{llm_tokens:key0:Bearer grace}:%d", day)
	testcaddy.Eventually(t, 5*time.Second, dayKey+" = 4050 in Redis", func() bool {
		v, _ := s.redis.Client().Get(context.Background(), dayKey).Result()
		return v == "4050"
	})
	g.remaining("Bearer grace", 0, 95450)
	for i := 4; i <= 60; i++ {
		if resp, _ := g.chat("Bearer grace", 1, false); resp.StatusCode != 200 {
			t.Fatalf("grace's request %d (scope cluster): %d", i, resp.StatusCode)
		}
	}
	if resp, body := g.chat("Bearer grace", 1, false); resp.StatusCode != 429 || !strings.Contains(body, `"rule":"llm_requests"`) {
		t.Fatalf("grace's 61st (scope cluster): %d %q, want 429 from llm_requests", resp.StatusCode, body)
	}
}

// llmGateway sends chat completions to the example's gateway.
type llmGateway struct {
	t   *testing.T
	url string
}

// chat asks for n generated tokens (no prompt, so the upstream reports n),
// streamed or not, with the Authorization header auth (none if empty).
func (g *llmGateway) chat(auth string, n int, stream bool) (*http.Response, string) {
	g.t.Helper()
	req, err := http.NewRequest("POST", g.url, strings.NewReader(fmt.Sprintf(`{"model":"m","max_tokens":%d,"stream":%t}`, n, stream)))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return testcaddy.Do(g.t, req)
}

// llmPolicies is the example's RateLimit-Policy: both rules', in the
// directive's order.
const llmPolicies = `"llm_requests";q=60;w=60, "llm_tokens";q=100000;w=86400`

// tokensLeft is the day's budget left that a response's RateLimit shows,
// its llm_tokens item's r, or "" without one.
func tokensLeft(resp *http.Response) string {
	for _, item := range strings.Split(resp.Header.Get("RateLimit"), ", ") {
		if rest, ok := strings.CutPrefix(item, `"llm_tokens";r=`); ok {
			left, _, _ := strings.Cut(rest, ";")
			return left
		}
	}
	return ""
}

// remaining sends a request of n tokens for auth and wants it admitted
// with want tokens left after its reserve.
func (g *llmGateway) remaining(auth string, n, want int) {
	g.t.Helper()
	resp, body := g.chat(auth, n, false)
	if resp.StatusCode != 200 || tokensLeft(resp) != strconv.Itoa(want) || resp.Header.Get("RateLimit-Policy") != llmPolicies {
		g.t.Fatalf("%s, %d tokens: %d %q, RateLimit %q policy %q, want 200 with %d tokens left",
			auth, n, resp.StatusCode, body, resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"), want)
	}
}

// refusedForTheDay wants auth's next request refused by llm_tokens until
// the next UTC midnight.
func (g *llmGateway) refusedForTheDay(auth string) {
	g.t.Helper()
	before := time.Now()
	resp, body := g.chat(auth, 0, false)
	after := time.Now()
	midnight := nextUTCMidnight()
	lo, hi := int64(midnight.Sub(after)/time.Second), int64(midnight.Sub(before)/time.Second)+1
	retry, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if resp.StatusCode != 429 || retry < lo || retry > hi {
		g.t.Fatalf("%s: %d Retry-After %q, want 429 with %d..%d (to UTC midnight)", auth, resp.StatusCode, resp.Header.Get("Retry-After"), lo, hi)
	}
	if want := fmt.Sprintf(`{"error":"rate_limited","rule":"llm_tokens","retry_after":%d}`, retry); body != want {
		g.t.Fatalf("%s refused: body %q, want %q", auth, body, want)
	}
	for h, want := range map[string]string{
		"X-RateLimit-Limit":     "100000",
		"X-RateLimit-Remaining": "0",
		"RateLimit-Policy":      llmPolicies,
	} {
		if got := resp.Header.Get(h); got != want {
			g.t.Fatalf("%s refused: %s %q, want %q", auth, h, got, want)
		}
	}
	// Both quotas, the per-minute one refunded: the refused request is
	// not one of the 60.
	if rl := resp.Header.Get("RateLimit"); !strings.HasPrefix(rl, `"llm_requests";r=`) || !strings.HasSuffix(rl, fmt.Sprintf(`, "llm_tokens";r=0;t=%d`, retry)) {
		g.t.Fatalf("%s refused: RateLimit %q, want llm_requests's item and llm_tokens's r=0;t=%d", auth, rl, retry)
	}
}

// holdStream starts a stream of 4,000 tokens (80 chunks, a minute apart)
// for auth and returns once its first event has come through the gateway
// (streamed, not held back until the end); it stays in flight until the
// returned cancel.
func (g *llmGateway) holdStream(auth string) context.CancelFunc {
	g.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.url, strings.NewReader(`{"max_tokens":4000,"stream":true}`))
	req.Header.Set("Authorization", auth)
	first := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- err.Error()
			return
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			line = err.Error()
		}
		first <- fmt.Sprintf("%d %s", resp.StatusCode, line)
		// Read on: closing the body would end the request.
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	select {
	case got := <-first:
		if !strings.HasPrefix(got, `200 data: {"choices":[{"delta":{"content":"word word`) {
			cancel()
			g.t.Fatalf("%s: held stream began %q, want 200 and a first event", auth, got)
		}
	case <-time.After(10 * time.Second):
		cancel()
		g.t.Fatalf("%s: no first event of the stream within 10s", auth)
	}
	return cancel
}

// inFlight waits until llm_tokens has n requests in flight.
func (g *llmGateway) inFlight(s *scenario, n int) {
	g.t.Helper()
	testcaddy.Eventually(g.t, 10*time.Second, fmt.Sprintf("%d requests in flight", n), func() bool {
		_, body := testcaddy.Get(g.t, s.admin+"/metrics")
		return strings.Contains(body, fmt.Sprintf(`sluice_ratelimit_in_flight{rule="llm_tokens"} %d`, n))
	})
}

// usage is the total_tokens of a non-streamed answer.
func usage(t *testing.T, body string) int {
	t.Helper()
	var a struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a.Usage.TotalTokens
}

// clearOfMinuteBoundary waits, if the next minute starts within 15 s,
// until it has begun: the sliding window's fixed windows are minutes of
// the clock, and 60 requests on either side of a boundary, slowed down
// (-race, a loaded machine), would let the previous minute's slide out
// enough for a 61st to pass.
func clearOfMinuteBoundary(t *testing.T) {
	next := time.Now().Truncate(time.Minute).Add(time.Minute)
	if d := time.Until(next); d < 15*time.Second {
		t.Logf("waiting %v for the next minute", d.Round(time.Millisecond))
		time.Sleep(d + 100*time.Millisecond) // sleep: until the wall clock starts the next minute
	}
}

func nextUTCMidnight() time.Time {
	return time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}
