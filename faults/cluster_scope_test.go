package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

const clusterRules = `rate_limit c_allow {
			qps            100000
			burst          100000
			key_resolver   userId
			scope          cluster
			redis_timeout  500ms
			on_redis_error allow
		}
		rate_limit c_deny {
			qps            100000
			burst          100000
			key_resolver   userId
			scope          cluster
			redis_timeout  500ms
			on_redis_error "deny 503"
		}
		rate_limit c_local {
			qps            100000
			burst          100000
			key_resolver   userId
			scope          cluster
			redis_timeout  500ms
			on_redis_error local
		}
		rate_limit c_lease {
			qps            100000
			burst          100000
			key_resolver   userId
			scope          cluster
			redis_timeout  500ms
			lease_size     10
		}
		rate_limit c_probe {
			qps            0.001
			burst          3
			key_resolver   userId
			scope          cluster
			redis_timeout  500ms
			on_redis_error allow
		}`

// The rules' redis_timeout is 500ms, pinned (the default was once 50ms): under -race on
// a busy 2-core machine a healthy Redis call can take longer than 50ms, and
// one timeout brings the client's health gate down for every rule, so the
// probe below would see on_redis_error's answer instead of the quota. This
// test is about failure modes, not the timeout's size (ratelimit's tests
// cover that).
//
// clusterLatencyBound: a request waits at most one redis_timeout, and
// once a timeout brings the health gate down the rest take the fallback at
// once, so the median of a fault phase stays far below the timeout (11 ms
// at most seen under -race on the busy 2-core box); a broken gate, every
// request of a pause waiting its timeout, puts it above half of it. The
// slowest request waits a timeout plus the machine's noise (1 s seen with
// Redis healthy), so max only catches one stuck beyond it.
var clusterLatencyBound = latencyBounds{median: ruleRedisTimeout / 2, max: 2 * time.Second}

// ruleRedisTimeout is the redis_timeout of clusterRules.
const ruleRedisTimeout = 500 * time.Millisecond

// TestClusterScopeUnderRedisFaults runs scope cluster rules (one quota in
// Redis) of every on_redis_error mode under load while Redis is paused,
// killed and restarted empty, and partitioned. Invariants: every request
// gets its mode's answer (allow and local: 200; deny: 200 or 503
// redis_unavailable), none waits much longer than redis_timeout, and once
// Redis is back the cluster quota is enforced again (scripts reloaded after
// the restart).
func TestClusterScopeUnderRedisFaults(t *testing.T) {
	r := redistest.Start(t)
	px := startProxy(t, r.Addr)
	c := testClient(t, r.Addr)
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	cfg := chainConfig{
		globals: fmt.Sprintf("admin localhost:%d\n\tpersist_config off\n\tstorage file_system %s\n\tlog {\n\t\toutput file %s\n\t}",
			admin, t.TempDir(), filepath.Join(t.TempDir(), "caddy.log")),
		redisURL: px.URL(), gw: testcaddy.FreePort(t), aux: testcaddy.FreePort(t),
		v1: upstream(t, "v1"), v2: upstream(t, "v2"),
		rules: clusterRules,
		extra: fmt.Sprintf(`
http://127.0.0.1:%d {
	handle /allow {
		ratelimit c_allow
		respond "ok"
	}
	handle /deny {
		ratelimit c_deny
		respond "ok"
	}
	handle /local {
		ratelimit c_local
		respond "ok"
	}
	handle /lease {
		ratelimit c_lease
		respond "ok"
	}
	handle /probe {
		ratelimit c_probe
		respond "ok"
	}
}
`, site),
	}
	push(t, c, "rate_limit", "probe", "qps", "100000", "burst", "100000", "key_resolver", "userId")
	testcaddy.Run(t, cfg.String())
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool { return adminStore(t, admin).Connected })
	base := fmt.Sprintf("http://127.0.0.1:%d", site)
	paths := []string{"/allow", "/deny", "/local", "/lease"}
	probeN := 0
	enforced := func(what string) {
		t.Helper()
		probeN++
		user := fmt.Sprintf("X-User-Id: cp%d", probeN)
		testcaddy.Eventually(t, 10*time.Second, "cluster quota enforced "+what, func() bool {
			// Once the gate is open again, a fresh user's bucket lives in Redis.
			resp, _ := testcaddy.Get(t, base+"/probe", user)
			if resp.StatusCode != 200 {
				return false
			}
			n, _ := c.Exists(context.Background(), fmt.Sprintf("ratelimit:tb2:{c_probe:user:cp%d}", probeN)).Result()
			return n == 1
		})
		// The first request spent one token: two more pass, then 429.
		wantStatuses(t, "cluster probe "+what, statuses(t, 3, base+"/probe", user), 200, 200, 429)
	}

	// Baseline of goroutines and Redis connections, after a warm-up.
	warm := startLoad(t, pick(200, 300), 8, func(n uint64) (*http.Request, check) {
		return mustRequest(base+paths[n%uint64(len(paths))], fmt.Sprintf("X-User-Id: u%d", n%50)), expect(200, "ok")
	})
	warm.waitSent(t, 200)
	warm.stopLoad()
	baseG := testcaddy.Settled(t, 20*time.Second, "goroutines", runtime.NumGoroutine)
	baseConns := testcaddy.Settled(t, 20*time.Second, "redis connections", func() int { return sluiceClients(t, c) })

	l := startLoad(t, pick(200, 300), 8, func(n uint64) (*http.Request, check) {
		p := paths[n%uint64(len(paths))]
		req := mustRequest(base+p, fmt.Sprintf("X-User-Id: u%d", n%50))
		if p != "/deny" {
			return req, expect(200, "ok")
		}
		return req, func(resp *http.Response, body string) error {
			if resp.StatusCode == 200 || resp.StatusCode == 503 && strings.Contains(body, "redis_unavailable") {
				return nil
			}
			return fmt.Errorf("/deny: status %d body %.80q, want 200 or 503 redis_unavailable", resp.StatusCode, body)
		}
	})
	l.setPhase("c-baseline")
	hold(phaseDur)
	enforced("at start")

	l.setPhase("c-paused")
	r.Pause()
	hold(phaseDur)
	r.Resume()
	l.setPhase("c-resumed")
	enforced("after a pause")
	hold(phaseDur / 2)

	l.setPhase("c-killed")
	r.Kill()
	hold(phaseDur)
	r.Restart() // empty: counters and scripts gone
	l.setPhase("c-restarted")
	enforced("after Redis restarted empty")
	hold(phaseDur / 2)

	l.setPhase("c-partitioned")
	px.Cut()
	hold(phaseDur)
	px.Heal()
	l.setPhase("c-healed")
	enforced("after a partition")
	hold(phaseDur / 2)
	l.stopLoad()
	l.report(clusterLatencyBound, 0) // no reload: nothing closes a connection

	m := metricsText(t, admin)
	var fb []string
	for _, mode := range []string{"allow", "deny", "local"} {
		v := 0.0
		for _, rule := range []string{"c_allow", "c_deny", "c_local", "c_lease"} {
			v += max(0, metric(m, fmt.Sprintf(`sluice_ratelimit_redis_fallback_total{mode=%q,rule=%q}`, mode, rule)))
		}
		fb = append(fb, fmt.Sprintf("%s=%v", mode, v))
		if v == 0 {
			t.Errorf("no decision took the on_redis_error %s path during the outages", mode)
		}
	}
	t.Logf("RESULT cluster scope: decisions without Redis by mode: %s", strings.Join(fb, " "))

	var g, conns, pooled int
	if !within(20*time.Second, func() bool {
		var ok bool
		g = runtime.NumGoroutine()
		conns, pooled, ok = redisConnsAccounted(t, c, admin)
		return g <= baseG+goroutineSlack && ok
	}) {
		t.Errorf("after the outages: goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d)\n%s",
			g, baseG, conns, baseConns, pooled, clientList(t, c))
	}
	t.Logf("RESULT cluster scope after 3 outages: goroutines=%d (baseline %d), redis connections=%d (baseline %d, held by the store's client %d)", g, baseG, conns, baseConns, pooled)
}
