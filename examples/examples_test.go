// Package examples_test runs the examples as a user would, so they never rot.
package examples_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "github.com/sluicegw/sluice"
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// example is examples/Caddyfile served on free ports given by the environment.
type example struct {
	gateway, admin string
}

func runExample(t *testing.T, redisURL string) example {
	t.Helper()
	raw, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	// The ports come from the environment, as `make run PORT=… ADMIN=…` does
	// gives them: the file is served as written.
	ports := map[string]int{}
	for _, name := range []string{"ADMIN_PORT", "GATEWAY_PORT", "V1_PORT", "V2_PORT"} {
		ports[name] = testcaddy.FreePort(t)
		t.Setenv(name, fmt.Sprint(ports[name]))
	}
	cf := strings.Replace(string(raw), "admin localhost", "persist_config off\n\tadmin localhost", 1)
	t.Setenv("SLUICE_REDIS", redisURL)
	testcaddy.Run(t, cf)
	return example{
		gateway: fmt.Sprintf("http://localhost:%d", ports["GATEWAY_PORT"]),
		admin:   fmt.Sprintf("http://localhost:%d", ports["ADMIN_PORT"]),
	}
}

func codes(t *testing.T, n int, url string, headers ...string) string {
	var out []string
	for i := 0; i < n; i++ {
		resp, _ := testcaddy.Get(t, url, headers...)
		out = append(out, fmt.Sprint(resp.StatusCode))
	}
	return strings.Join(out, " ")
}

// TestTourWithoutRedis is the README's tour with no Redis reachable: the
// example serves on the rules declared in its Caddyfile.
func TestTourWithoutRedis(t *testing.T) {
	ex := runExample(t, "redis://127.0.0.1:1")

	resp, body := testcaddy.Get(t, ex.gateway+"/")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "v1") {
		t.Fatalf("GET / = %d %q, want 200 from v1", resp.StatusCode, body)
	}
	if resp.Header.Get("X-RateLimit-Limit") == "" || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("no rate-limit headers: %v", resp.Header)
	}
	if _, body := testcaddy.Get(t, ex.gateway+"/", "X-Canary: true"); !strings.HasPrefix(body, "v2") {
		t.Fatalf("canary request answered %q, want v2", body)
	}
	// 5 req/s with bursts of 10 per user: a quick burst of 12 gets 10 through.
	got := codes(t, 12, ex.gateway+"/", "X-User-Id: alice")
	if strings.Count(got, "200") < 10 || !strings.HasSuffix(got, "429") {
		t.Fatalf("burst of 12 for alice: %s", got)
	}
	// Three upstream failures open the breaker; then it fails fast.
	got = codes(t, 6, ex.gateway+"/flaky", "X-User-Id: flaky-tester")
	if got != "500 500 500 503 503 503" {
		t.Fatalf("/flaky: %s, want three 500s then 503s", got)
	}
	resp, _ = testcaddy.Get(t, ex.admin+"/sluice/rules/rate_limit/order_api")
	if resp.StatusCode != 200 {
		t.Fatalf("admin rule lookup: %d", resp.StatusCode)
	}
}

// TestTourWithRedis pushes the README's live change with redis-cli and the
// examples/push-rules.sh script.
func TestTourWithRedis(t *testing.T) {
	r := redistest.Start(t)
	ex := runExample(t, r.URL())
	testcaddy.Eventually(t, 10*time.Second, "store connected", func() bool {
		_, body := testcaddy.Get(t, ex.admin+"/sluice/store")
		return strings.Contains(body, `"connected":true`)
	})
	cli := func(args ...string) {
		t.Helper()
		out, err := exec.Command("redis-cli", append([]string{"-p", fmt.Sprint(r.Port)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v %s", args, err, out)
		}
	}
	cli("HSET", "rate_limit:rule:order_api", "limit_type", "TOKEN_BUCKET", "qps", "1", "burst", "2", "key_resolver", "userId")
	cli("PUBLISH", "gateway:rules:rate_limit", "order_api")
	testcaddy.Eventually(t, 10*time.Second, "rule from Redis in force", func() bool {
		_, body := testcaddy.Get(t, ex.admin+"/sluice/rules/rate_limit/order_api")
		return strings.Contains(body, `"source":"redis"`)
	})
	if got := codes(t, 4, ex.gateway+"/", "X-User-Id: bob"); got != "200 200 429 429" {
		t.Fatalf("bob after qps 1 burst 2: %s", got)
	}

	cmd := exec.Command("./push-rules.sh")
	cmd.Env = append(os.Environ(), fmt.Sprintf("REDIS_CLI_ARGS=-p %d", r.Port))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("push-rules.sh: %v\n%s", err, out)
	}
	for _, path := range []string{"rate_limit/order_api", "rate_limit/payment_api", "gray/product_detail"} {
		testcaddy.Eventually(t, 10*time.Second, path+" pushed", func() bool {
			resp, body := testcaddy.Get(t, ex.admin+"/sluice/rules/"+path)
			return resp.StatusCode == http.StatusOK && strings.Contains(body, `"source":"redis"`)
		})
	}
}
