package ratelimit_test

import (
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// warm_up with scope cluster through Caddy: a cold key lets through about
// burst/cold_factor of a burst (its curve in Redis), and while Redis is
// down on_redis_error local warms up this instance's share the same way;
// a plain token bucket would admit the whole burst either way.
func TestClusterWarmUpInCaddy(t *testing.T) {
	rd := redistest.Start(t)
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", `
	ratelimit {
		qps 30
		burst 30
		key_resolver {http.request.header.X-K}
		scope cluster
		control_behavior warm_up
		warm_up_period 1m
		on_redis_error local
		redis_timeout 150ms
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	coldBurst := func(phase string) {
		t.Helper()
		start := time.Now()
		admitted := 0
		for i := 0; i < 30; i++ {
			if status(t, s.urls[0], "X-K: "+phase) == 200 {
				admitted++
			}
		}
		took := time.Since(start)
		// Cold: 10 at once (burst/3), then 10 req/s (qps/3) while the 30
		// requests take `took`; a warm bucket would admit all 30.
		if want := 10 + int(took.Seconds()*10) + 1; admitted < 9 || admitted > want || admitted >= 30 {
			t.Fatalf("%s: cold burst %d of 30 admitted in %v, want about 10 (at most %d)", phase, admitted, took, want)
		}
	}
	coldBurst("up")
	rd.Kill()
	coldBurst("killed")
}
