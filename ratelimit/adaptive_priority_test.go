package ratelimit_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// Priorities in Caddy: a limit of one request in flight and a queue of
// one. While a request holds the slot, a low request waits; a high one
// arriving then takes its place in the full queue, and the low one is
// refused at once with 503 and Sluice-Priority: low (the class from the
// X-Priority header through the priority placeholder). When the slot
// frees, the high request is served. The metrics count the push-out by
// class and the access log's placeholder names the class.
func TestAdaptivePriorityPushesOutLowerClass(t *testing.T) {
	up := newSlowUpstream(t)
	s := caddyfile(t, `	rulestore {
		rate_limit adapt {
			key_resolver global
			max_concurrent adaptive
			min_limit 1
			max_limit 1
			initial_limit 1
			max_queued 1
			max_queue_wait 20s
			concurrency_status 503
			priority {http.request.header.X-Priority}
		}
	}`, fmt.Sprintf("ratelimit adapt\n\theader >X-Class {http.ratelimit.priority}\n\treverse_proxy %s", hostPort(up)))
	testcaddy.Run(t, s.cfg)
	type answer struct {
		status   int
		priority string
		class    string
		err      error
	}
	send := func(block bool, prio string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", s.urls[0], nil)
			if block {
				req.Header.Set("X-Block", "1")
			}
			if prio != "" {
				req.Header.Set("X-Priority", prio)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ch <- answer{status: resp.StatusCode, priority: resp.Header.Get("Sluice-Priority"), class: resp.Header.Get("X-Class")}
		}()
		return ch
	}
	queued := func(class string, n float64) func() bool {
		return func() bool {
			return metricValue(metrics(t, s.adminPort), fmt.Sprintf(`sluice_ratelimit_queued{class=%q,rule="adapt"}`, class)) == n
		}
	}
	holder := send(true, "")
	testcaddy.Eventually(t, 10*time.Second, "the first request holds the slot", func() bool { return up.arrived.Load() == 1 })
	low := send(true, "low")
	testcaddy.Eventually(t, 10*time.Second, "the low request waits", queued("low", 1))
	high := send(true, "HIGH")
	testcaddy.Eventually(t, 10*time.Second, "the high request waits", queued("high", 1))
	select {
	case a := <-low:
		if a.err != nil || a.status != 503 || a.priority != "low" {
			t.Fatalf("low: %+v, want 503 with Sluice-Priority: low", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the low request was not refused when the high one took its place")
	}
	m := metrics(t, s.adminPort)
	if v := metricValue(m, `sluice_ratelimit_shed_total{class="low",reason="pushed_out",rule="adapt"}`); v != 1 {
		t.Errorf("shed_total{low,pushed_out} %v, want 1\n%s", v, grep(m, "shed"))
	}
	up.unblock()
	for name, ch := range map[string]chan answer{"holder": holder, "high": high} {
		select {
		case a := <-ch:
			if a.err != nil || a.status != 200 {
				t.Fatalf("%s: %+v, want 200", name, a)
			}
			if want := map[string]string{"holder": "normal", "high": "high"}[name]; a.class != want {
				t.Errorf("%s: {http.ratelimit.priority} %q, want %q", name, a.class, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not answered", name)
		}
	}
	if up.arrived.Load() != 2 {
		t.Errorf("the upstream saw %d requests, want 2 (the low one never reached it)", up.arrived.Load())
	}
	if st := stateBody(t, s.adminPort); !strings.Contains(st, `"low":{"waiting":0,"admitted_after_wait":0,"queue_full":0,"queue_timeout":0,"pushed_out":1}`) {
		t.Errorf("/sluice/state does not show the low class's push-out:\n%s", st)
	}
}

func stateBody(t *testing.T, admin int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/sluice/state", admin))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
