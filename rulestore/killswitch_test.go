package rulestore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// killSwitchCaddyfile declares one rule of each kind in the Caddyfile, as a
// user would; Redis then overlays them.
func killSwitchCaddyfile(redisURL string, port int) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		rate_limit api {
			qps          1000
			key_resolver global
		}
		circuit_breaker backend {
			failure_threshold 5
			open_duration     1m
		}
		gray canary {
			match_tag        X-Beta
			match_value      yes
			target_version   v2
			fallback_version v1
			weight           100
		}
	}
}
http://127.0.0.1:%d {
	handle /rl {
		ratelimit api
		respond "ok"
	}
	handle /cb {
		circuitbreaker backend
		respond "ok"
	}
	handle /gray {
		grayroute canary
		respond "{http.grayroute.version}"
	}
}`, redisURL, port)
}

// killSwitchTimeout bounds the wait for a kill switch on each instance. The
// goal is 10 ms (measured and logged below, and in BenchmarkPropagation);
// this bound only catches "never applied" on a loaded 2-core machine.
const killSwitchTimeout = 5 * time.Second

// untilAll polls every url concurrently from the moment of publish until
// done holds for each, and returns the slowest instance's delay.
func untilAll(t *testing.T, urls []string, header string, publish func(), done func(status int, body string) bool) time.Duration {
	t.Helper()
	var wg sync.WaitGroup
	delays := make([]time.Duration, len(urls))
	errs := make([]error, len(urls))
	start := time.Now()
	publish()
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, body := getQuiet(u, header)
				if resp != 0 && done(resp, body) {
					delays[i] = time.Since(start)
					return
				}
				if time.Since(start) > killSwitchTimeout {
					errs[i] = fmt.Errorf("instance %d (%s): not in force after %v (last: %d %q)", i, u, killSwitchTimeout, resp, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return max(delays[0], delays[len(delays)-1])
}

func TestKillSwitchesOverlayCaddyfileRulesOnEveryInstance(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	base := make([]string, 2)
	for i := range base {
		port := testcaddy.FreePort(t)
		testcaddy.Start(t, killSwitchCaddyfile(r.URL(), port))
		base[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	paths := func(p string) []string {
		out := make([]string, len(base))
		for i, b := range base {
			out[i] = b + p
		}
		return out
	}

	// As declared: beta users on v2, everyone else on v1, no limit, breaker closed.
	for _, b := range base {
		if _, body := testcaddy.Get(t, b+"/gray", "X-Beta: yes"); body != "v2" {
			t.Fatalf("%s: beta user on %q before the kill switch, want v2", b, body)
		}
		if _, body := testcaddy.Get(t, b+"/gray"); body != "v1" {
			t.Fatalf("%s: other user on %q, want v1", b, body)
		}
	}

	push := func(key, channel, id string, fields ...any) func() {
		return func() { redistest.Push(t, c, key, channel, id, fields...) }
	}
	var figures []string

	// Gray: weight 0 sends the tagged users back to v1, and keeps the
	// match: users without the tag stay on v1 too.
	d := untilAll(t, paths("/gray"), "X-Beta: yes", push("gray:rule:canary", "gateway:rules:gray", "canary", "weight", "0"),
		func(status int, body string) bool { return body == "v1" })
	figures = append(figures, fmt.Sprintf("gray weight 0: %v", d))
	for _, b := range base {
		for i := range 20 {
			if _, body := testcaddy.Get(t, b+"/gray", fmt.Sprintf("X-User-Id: u%d", i)); body != "v1" {
				t.Fatalf("%s: untagged user u%d on %q with the overlay, want v1", b, i, body)
			}
		}
	}

	// Breaker: state force_open rejects at once.
	d = untilAll(t, paths("/cb"), "", push("circuit_breaker:rule:backend", "gateway:rules:circuit_breaker", "backend", "state", "force_open"),
		func(status int, body string) bool { return status == 503 })
	figures = append(figures, fmt.Sprintf("circuit_breaker state force_open: %v", d))

	// Rate limit: qps 1 (burst follows qps, as the Caddyfile set none).
	d = untilAll(t, paths("/rl"), "", push("rate_limit:rule:api", "gateway:rules:rate_limit", "api", "qps", "1"),
		func(status int, body string) bool { return status == 429 })
	figures = append(figures, fmt.Sprintf("rate_limit qps 1: %v", d))
	t.Logf("kill switch in force on both instances after the publish (goal 10ms; includes HTTP polling): %s",
		strings.Join(figures, ", "))

	// DEL restores every rule as declared.
	restore := func() {
		for _, k := range []struct{ key, ch, id string }{
			{"gray:rule:canary", "gateway:rules:gray", "canary"},
			{"circuit_breaker:rule:backend", "gateway:rules:circuit_breaker", "backend"},
			{"rate_limit:rule:api", "gateway:rules:rate_limit", "api"},
		} {
			c.Del(ctx, k.key)
			c.Publish(ctx, k.ch, k.id)
		}
	}
	untilAll(t, paths("/gray"), "X-Beta: yes", restore, func(status int, body string) bool { return body == "v2" })
	untilAll(t, paths("/cb"), "", func() {}, func(status int, body string) bool { return status == 200 })
	// qps back to 1000: the bucket the kill switch emptied refills at
	// 1000 a second. The wait sends one request at a time, so that it does
	// not drain what it waits for (20 requests per poll, 5 ms apart, took
	// every token refilled between polls on a quiet machine, where a
	// request takes well under a millisecond, and never saw 20 in a row),
	// until the declared rule is in force with 20 tokens left; then 20
	// requests in a row must pass.
	for _, b := range base {
		var last string // what the last request of the wait saw, logged if it fails
		t.Cleanup(func() {
			if t.Failed() && last != "" {
				t.Logf("%s: the last request of the wait after the DEL saw %s", b, last)
			}
		})
		testcaddy.Eventually(t, 10*time.Second, b+": the declared qps 1000 in force with 20 tokens left after DEL", func() bool {
			resp, err := pollClient.Get(b + "/rl")
			if err != nil {
				last = err.Error()
				return false
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			policy, state := resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit")
			last = fmt.Sprintf("%d %q RateLimit-Policy=%q RateLimit=%q", resp.StatusCode, body, policy, state)
			m := remainingRe.FindStringSubmatch(state)
			if !strings.Contains(policy, "q=1000;") || m == nil {
				return false
			}
			left, _ := strconv.Atoi(m[1])
			return left >= 20
		})
		for i := range 20 {
			if status, _ := getQuiet(b+"/rl", ""); status != 200 {
				t.Fatalf("%s: request %d of 20 in a row after DEL answered %d, want 200 (qps 1000, 20 tokens left before them)", b, i+1, status)
			}
		}
	}
}

// remainingRe reads the tokens left from a RateLimit header.
var remainingRe = regexp.MustCompile(`;r=(\d+)`)

// getQuiet is a GET that reports a failed request as status 0 (the caller
// polls until a deadline).
func getQuiet(url, header string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if name, value, ok := strings.Cut(header, ":"); ok {
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := pollClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var pollClient = &http.Client{Timeout: 5 * time.Second}
