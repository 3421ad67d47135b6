package ratelimit_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestMetricsFromProvisioning scrapes the real /metrics endpoint: every
// series an alert may test with absent() is there at 0 before any request,
// and the Redis-only series exist for the scope cluster rule only, never
// for the local one, before and after traffic.
func TestMetricsFromProvisioning(t *testing.T) {
	r := redistest.Start(t)
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		redis %s
		rate_limit loc {
			qps          100
			key_resolver global
		}
		rate_limit clu {
			qps          100
			key_resolver global
			scope        cluster
		}
	}
}
http://127.0.0.1:%d {
	handle /loc {
		ratelimit loc
		respond "ok"
	}
	handle /clu {
		ratelimit clu
		respond "ok"
	}
}`, admin, r.URL(), site))
	scrape := func() string {
		resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", admin))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	has := func(when, m string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(m, w+"\n") {
				t.Errorf("%s: metrics lack %s", when, w)
			}
		}
	}
	noLocalRedis := func(when, m string) {
		t.Helper()
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, "sluice_ratelimit_redis_") && strings.Contains(line, `rule="loc"`) {
				t.Errorf("%s: the local rule exports a Redis series: %s", when, line)
			}
		}
	}

	m := scrape()
	has("after provisioning", m,
		`sluice_ratelimit_requests_total{result="allowed",rule="loc"} 0`,
		`sluice_ratelimit_requests_total{result="rejected",rule="loc"} 0`,
		`sluice_ratelimit_requests_total{result="rejected",rule="clu"} 0`,
		`sluice_ratelimit_keys{rule="loc"} 0`,
		`sluice_ratelimit_in_flight{rule="loc"} 0`,
		`sluice_ratelimit_redis_calls_total{result="error",rule="clu"} 0`,
		`sluice_ratelimit_redis_fallback_total{mode="local",rule="clu"} 0`,
		`sluice_ratelimit_redis_fallback_total{mode="deny",rule="clu"} 0`,
	)
	noLocalRedis("after provisioning", m)

	for _, path := range []string{"/loc", "/clu"} {
		if resp, _ := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d%s", site, path)); resp.StatusCode != 200 {
			t.Fatalf("%s: got %d", path, resp.StatusCode)
		}
	}
	m = scrape()
	has("after one request each", m,
		`sluice_ratelimit_requests_total{result="allowed",rule="loc"} 1`,
		`sluice_ratelimit_requests_total{result="allowed",rule="clu"} 1`,
		`sluice_ratelimit_redis_calls_total{result="ok",rule="clu"} 1`,
		`sluice_ratelimit_redis_fallback_total{mode="local",rule="clu"} 0`,
	)
	noLocalRedis("after one request each", m)
}
