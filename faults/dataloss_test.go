package faults_test

// What survives Redis losing its data when an instance then restarts: the
// local rule snapshot under Caddy's data directory keeps the fleet's good
// rules where the loss cannot erase them.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// lossCaddyfile: a route limited by rule r_user, held in Redis only.
func lossCaddyfile(redisURL string, port int) string {
	return fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		redis %s
		resync 1s
	}
}
http://127.0.0.1:%d {
	ratelimit r_user
	respond "ok"
}
`, redisURL, port)
}

// lossInstance is one Caddy process of the fleet.
type lossInstance struct {
	*testcaddy.Process
	port int
	cfg  string
}

func startLossInstance(t *testing.T, redisURL string) *lossInstance {
	port := testcaddy.FreePort(t)
	cfg := lossCaddyfile(redisURL, port)
	return &lossInstance{testcaddy.Start(t, cfg), port, cfg}
}

// refuses reports whether the instance enforces r_user (qps 0.001, burst
// 1): of two requests, one is refused.
func (in *lossInstance) refuses(t *testing.T) bool {
	t.Helper()
	refused := false
	for range 2 {
		resp, _ := testcaddy.Get(t, fmt.Sprintf("http://127.0.0.1:%d/", in.port))
		refused = refused || resp.StatusCode == http.StatusTooManyRequests
	}
	return refused
}

// waitSnapshot waits until the instance's local snapshot holds a rule
// with this text in it.
func (in *lossInstance) waitSnapshot(t *testing.T, text string) {
	t.Helper()
	testcaddy.Eventually(t, 20*time.Second, "local rule snapshot holds "+text, func() bool {
		files, _ := filepath.Glob(filepath.Join(in.Dir(), "caddy", "sluice", "rules-*.json"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), text) {
				return true
			}
		}
		return false
	})
}

// restart restarts the instance and waits for its first load from Redis;
// logs returns what it logged since the restart.
func (in *lossInstance) restart(t *testing.T) (logs func() string) {
	t.Helper()
	from := len(in.Logs())
	in.Restart(in.cfg)
	logs = func() string { return in.Logs()[from:] }
	testcaddy.Eventually(t, 20*time.Second, "first load from redis after the restart", func() bool {
		return strings.Contains(logs(), `"msg":"resynced rules from redis"`)
	})
	return logs
}

// logLine reports whether one line of logs has every one of substrs.
func logLine(logs string, substrs ...string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		all := true
		for _, s := range substrs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return true
		}
	}
	return false
}

// TestRestartAfterRedisDataLossKeepsRules: Redis loses its data (FLUSHALL)
// and instance B restarts: B still enforces the Redis-only rule, like A.
func TestRestartAfterRedisDataLossKeepsRules(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	a, b := startLossInstance(t, r.URL()), startLossInstance(t, r.URL())
	redistest.Push(t, c, "rate_limit:rule:r_user", "gateway:rules:rate_limit", "r_user", "qps", "0.001", "burst", "1", "key_resolver", "global")
	for _, in := range []*lossInstance{a, b} {
		testcaddy.Eventually(t, 20*time.Second, "r_user enforced", func() bool { return in.refuses(t) })
	}
	b.waitSnapshot(t, `"r_user"`)

	r.Flush()
	logs := b.restart(t)
	if !b.refuses(t) {
		t.Errorf("B passes everything after Redis lost its data and B restarted; want 429 like A:\n%s", logs())
	}
	if !a.refuses(t) {
		t.Error("A stopped enforcing r_user after Redis lost its data")
	}
	if !logLine(logs(), `"level":"error"`, "redis lost its data since the local rule snapshot was written", `"retained":1`) {
		t.Errorf("B did not log that it serves the snapshot's rules after the loss:\n%s", logs())
	}
	// Redis gets the rule again, changed: it takes over as usual.
	redistest.Push(t, c, "rate_limit:rule:r_user", "gateway:rules:rate_limit", "r_user", "qps", "1000", "burst", "1000", "key_resolver", "global")
	for _, in := range []*lossInstance{a, b} {
		testcaddy.Eventually(t, 20*time.Second, "the rewritten r_user in force", func() bool { return !in.refuses(t) })
	}
}

// TestGarbledLastGoodServedFromDisk: the rule's hash in Redis is rejected
// and its last-good record is garbled; the restarted instance logs the
// garbled record and serves the rule from its local snapshot.
func TestGarbledLastGoodServedFromDisk(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	b := startLossInstance(t, r.URL())
	redistest.Push(t, c, "rate_limit:rule:r_user", "gateway:rules:rate_limit", "r_user", "qps", "0.001", "burst", "1", "key_resolver", "global")
	testcaddy.Eventually(t, 20*time.Second, "r_user enforced", func() bool { return b.refuses(t) })
	b.waitSnapshot(t, `"r_user"`)
	const lastGood = "gateway:last_good:rate_limit:r_user"
	testcaddy.Eventually(t, 20*time.Second, "last-good record written", func() bool { return c.Exists(ctx, lastGood).Val() == 1 })

	redistest.Push(t, c, "rate_limit:rule:r_user", "gateway:rules:rate_limit", "r_user", "qps", "lots")
	testcaddy.Eventually(t, 20*time.Second, "the bad version rejected", func() bool {
		return strings.Contains(b.Logs(), "rule rejected: keeping the last good version")
	})
	if err := c.Set(ctx, lastGood, `{"version":"x","fields":{"qps":`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	logs := b.restart(t)
	if !b.refuses(t) {
		t.Errorf("after the restart r_user is not in force (hash rejected, last-good record garbled); want it from the local snapshot:\n%s", logs())
	}
	if !logLine(logs(), `"level":"error"`, "the fleet's last good version is garbled", `"last_good":"`+lastGood+`"`, `"reason":"not JSON`) {
		t.Errorf("B did not log the garbled last-good record as an error naming its key and reason:\n%s", logs())
	}
	if !logLine(logs(), "serving the local snapshot's", `"key":"rate_limit:rule:r_user"`) {
		t.Errorf("B did not log that it serves the local snapshot's version:\n%s", logs())
	}
	// Its first load held no version: the rejection says so, not "keeping".
	if !logLine(logs(), "rule rejected: no version of it is held here", `"key":"rate_limit:rule:r_user"`) {
		t.Errorf("B's first rejection after the restart does not say it held no version:\n%s", logs())
	}
}

// TestRestartWhileRedisDownKeepsRules: Redis is unreachable when the
// instance restarts; it serves the rule from its local snapshot until
// Redis answers, and, Redis back empty (its data lost), goes on serving
// it as a retained rule.
func TestRestartWhileRedisDownKeepsRules(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	b := startLossInstance(t, r.URL())
	redistest.Push(t, c, "rate_limit:rule:r_user", "gateway:rules:rate_limit", "r_user", "qps", "0.001", "burst", "1", "key_resolver", "global")
	testcaddy.Eventually(t, 20*time.Second, "r_user enforced", func() bool { return b.refuses(t) })
	b.waitSnapshot(t, `"r_user"`)

	r.Kill()
	from := len(b.Logs())
	b.Restart(b.cfg)
	logs := func() string { return b.Logs()[from:] }
	// The snapshot is in force before the store logs that Redis is
	// unavailable.
	testcaddy.Eventually(t, 20*time.Second, "B finds redis unavailable", func() bool {
		return strings.Contains(logs(), "redis unavailable: serving the last good rules")
	})
	if !b.refuses(t) {
		t.Fatalf("B passes everything after restarting while Redis is down; want r_user from its snapshot:\n%s", logs())
	}
	if !logLine(logs(), "redis unreachable at start: serving the rules of the local rule snapshot", `"rules":1`) {
		t.Errorf("B did not log that it serves its snapshot while Redis is down:\n%s", logs())
	}
	r.Restart() // empty: Redis lost its data meanwhile
	testcaddy.Eventually(t, 20*time.Second, "first load from redis", func() bool {
		return strings.Contains(logs(), `"msg":"resynced rules from redis"`)
	})
	if !b.refuses(t) {
		t.Errorf("B stopped enforcing r_user once Redis came back empty:\n%s", logs())
	}
	if !logLine(logs(), "redis lost its data since the local rule snapshot was written", `"retained":1`) {
		t.Errorf("B did not retain the snapshot's rule once Redis came back empty:\n%s", logs())
	}
}
