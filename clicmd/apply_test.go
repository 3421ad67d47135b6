package clicmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// applyFixture is a server on Redis holding rate_limit order_api, and the
// rule set files of the apply tests.
type applyFixture struct {
	p   *testcaddy.Process
	c   *redis.Client
	dir string
}

const orderAPI = `"order_api": {"limit_type": "token_bucket", "qps": %d, "burst": 5, "key_resolver": "ip"}`

func newApplyFixture(t *testing.T) *applyFixture {
	r := redistest.Start(t)
	c := r.Client()
	redistest.Push(t, c, "rate_limit:rule:order_api", "gateway:rules:rate_limit", "order_api",
		"limit_type", "token_bucket", "qps", "1", "burst", "5", "key_resolver", "ip")
	p := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "redis "+r.URL(), testcaddy.FreePort(t)))
	testcaddy.Eventually(t, 10*time.Second, "order_api loaded from redis", func() bool {
		_, _, ok := sluice(t, p, "rules", "get", "rate_limit", "order_api")
		return ok
	})
	return &applyFixture{p: p, c: c, dir: t.TempDir()}
}

// file writes a rule set whose binding checkout names rate limit rule ref.
func (f *applyFixture) file(t *testing.T, name, ref string) string {
	path := filepath.Join(f.dir, name)
	body := fmt.Sprintf(`{
  "rate_limit": {`+orderAPI+`, "fresh": {"limit_type": "token_bucket", "qps": 3, "burst": 3, "key_resolver": "ip"}},
  "circuit_breaker": {"cli_cb": {"failure_threshold": 7}},
  "binding": {"checkout": {"rate_limit": %q}}
}`, 2, ref)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// namedKeys are the Redis keys the apply files name: each rule's hash and
// history, and the change log.
var namedKeys = []string{
	"rate_limit:rule:order_api", "gateway:history:rate_limit:order_api",
	"rate_limit:rule:fresh", "gateway:history:rate_limit:fresh",
	"circuit_breaker:rule:cli_cb", "gateway:history:circuit_breaker:cli_cb",
	"gateway:binding:checkout", "gateway:history:binding:checkout",
	"gateway:rules",
}

// redisState is every named key's type and content, for before/after
// comparison.
func (f *applyFixture) redisState(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, key := range namedKeys {
		typ := f.c.Type(ctx, key).Val()
		fmt.Fprintf(&b, "%s %s:", key, typ)
		switch typ {
		case "hash":
			m := f.c.HGetAll(ctx, key).Val()
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(&b, " %s=%s", n, m[n])
			}
		case "list":
			fmt.Fprintf(&b, " %q", f.c.LRange(ctx, key, 0, -1).Val())
		case "stream":
			for _, e := range f.c.XRange(ctx, key, "-", "+").Val() {
				fmt.Fprintf(&b, " %s", e.ID)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// postApply sends POST /sluice/apply with a JSON body.
func postApply(t *testing.T, p *testcaddy.Process, query, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://localhost:%d/sluice/apply%s", p.AdminPort, query), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A file whose binding names a rule that exists nowhere (a typo of
// order_api) fails in the dry run and in the real run alike, with the
// suggestion, and leaves every key it names exactly as it was: the rules
// before the binding are not written either.
func TestApplyDanglingBindingWritesNothing(t *testing.T) {
	f := newApplyFixture(t)
	bad := f.file(t, "dangling.json", "order_apj")
	before := f.redisState(t)
	for _, args := range [][]string{{"apply", "-f", bad, "--dry-run"}, {"apply", "-f", bad}} {
		_, errOut, ok := sluice(t, f.p, args...)
		if ok || !strings.Contains(errOut, "nothing written") ||
			!strings.Contains(errOut, `binding checkout: field rate_limit: no rate_limit rule "order_apj"`) ||
			!strings.Contains(errOut, "did you mean order_api?") {
			t.Fatalf("%v: ok=%v\n%s", args, ok, errOut)
		}
		if strings.Contains(errOut, "allow_missing") {
			t.Fatalf("%v suggests a flag apply does not have:\n%s", args, errOut)
		}
		if after := f.redisState(t); after != before {
			t.Fatalf("%v changed Redis:\nbefore:\n%s\nafter:\n%s", args, before, after)
		}
	}
}

// A file applied while a rule it names changes after the dry run the
// operator reviewed (the versions the apply is guarded by) writes nothing:
// 412, the changed rule named, every key as the concurrent writer left it.
func TestApplyRacingAConcurrentChangeWritesNothing(t *testing.T) {
	f := newApplyFixture(t)
	rules := fmt.Sprintf(`{"rate_limit": {`+orderAPI+`}, "binding": {"checkout": {"rate_limit": "order_api"}}}`, 2)
	code, body := postApply(t, f.p, "?dry_run=true", `{"rules": `+rules+`}`)
	var plan struct {
		Objects []struct {
			Kind, ID    string
			PrevVersion string `json:"prev_version"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(body), &plan); code != 200 || err != nil || len(plan.Objects) != 2 {
		t.Fatalf("dry run: %d %s", code, body)
	}
	expect := map[string]map[string]string{"rate_limit": {}, "binding": {}}
	for _, o := range plan.Objects {
		expect[o.Kind][o.ID] = o.PrevVersion
	}
	if expect["rate_limit"]["order_api"] == "" || expect["binding"]["checkout"] != "" {
		t.Fatalf("dry run versions: %s", body)
	}

	// Another operator changes order_api.
	redistest.Push(t, f.c, "rate_limit:rule:order_api", "gateway:rules:rate_limit", "order_api", "qps", "9")
	// The instance records the change it saw in the rule's history, off
	// its reading path (up to a second later): the state the apply must
	// leave alone is the one after that.
	testcaddy.Eventually(t, 10*time.Second, "the concurrent change in the history", func() bool {
		h, _ := f.c.LRange(context.Background(), "gateway:history:rate_limit:order_api", 0, 0).Result()
		return len(h) == 1 && strings.Contains(h[0], `"qps":"9"`)
	})
	before := f.redisState(t)
	e, _ := json.Marshal(expect)
	code, body = postApply(t, f.p, "", `{"rules": `+rules+`, "expect": `+string(e)+`}`)
	if code != http.StatusPreconditionFailed || !strings.Contains(body, `"applied":false`) ||
		!strings.Contains(body, `"kind":"rate_limit","id":"order_api","result":"failed","reason":"changed since it was read`) {
		t.Fatalf("apply after a concurrent change: %d %s", code, body)
	}
	if after := f.redisState(t); after != before {
		t.Fatalf("the apply changed Redis:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// A good file applies all of it in one step (rules, overlay and binding,
// each with its history entry and change-log entry), the dry run answers
// the same verdicts as the real run, and the rules are in force.
func TestApplyGoodFileAppliesAll(t *testing.T) {
	f := newApplyFixture(t)
	good := f.file(t, "good.json", "order_api")
	b, _ := os.ReadFile(good)
	dryCode, dry := postApply(t, f.p, "?dry_run=true", `{"rules": `+string(b)+`}`)
	out := mustSluice(t, f.p, "apply", "-f", good)
	if !strings.Contains(out, "applied: 2 created, 2 changed, 0 deleted, 0 unchanged") ||
		!strings.Contains(out, "~ rate_limit order_api") || !strings.Contains(out, "    qps: 1 -> 2") ||
		!strings.Contains(out, "+ binding checkout") || !strings.Contains(out, "~ circuit_breaker cli_cb") {
		t.Fatalf("apply:\n%s", out)
	}
	ctx := context.Background()
	for key, want := range map[string]string{
		"rate_limit:rule:order_api":   "map[burst:5 key_resolver:ip limit_type:token_bucket qps:2]",
		"rate_limit:rule:fresh":       "map[burst:3 key_resolver:ip limit_type:token_bucket qps:3]",
		"circuit_breaker:rule:cli_cb": "map[failure_threshold:7]",
		"gateway:binding:checkout":    "map[rate_limit:order_api]",
	} {
		if got := fmt.Sprint(f.c.HGetAll(ctx, key).Val()); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
		hist := strings.Replace(strings.Replace(key, ":rule:", ":", 1), "gateway:binding:", "binding:", 1)
		if h := f.c.LIndex(ctx, "gateway:history:"+hist, 0).Val(); !strings.Contains(h, `"via":"apply"`) {
			t.Errorf("history of %s: %s", key, h)
		}
	}
	if n := f.c.XLen(ctx, "gateway:rules").Val(); n != 4 {
		t.Errorf("%d change-log entries, want 4 (one per object written)", n)
	}
	testcaddy.Eventually(t, 10*time.Second, "binding checkout in force", func() bool {
		_, _, ok := sluice(t, f.p, "bindings", "get", "checkout")
		return ok
	})

	// The verdicts of the dry run are those of the run; run again, all
	// unchanged.
	var d, r struct {
		Objects []map[string]any `json:"objects"`
	}
	json.Unmarshal([]byte(dry), &d)
	f.c.Del(ctx, "rate_limit:rule:fresh", "gateway:binding:checkout", "circuit_breaker:rule:cli_cb")
	f.c.HSet(ctx, "rate_limit:rule:order_api", "qps", "1")
	code, real := postApply(t, f.p, "", `{"rules": `+string(b)+`}`)
	json.Unmarshal([]byte(real), &r)
	if dryCode != 200 || code != 200 || len(d.Objects) != 4 || fmt.Sprint(d.Objects) != fmt.Sprint(r.Objects) {
		t.Fatalf("dry run and run differ:\n%d %s\n%d %s", dryCode, dry, code, real)
	}
	if out = mustSluice(t, f.p, "apply", "-f", good); !strings.Contains(out, "0 to write, 0 to delete") {
		t.Fatalf("second apply:\n%s", out)
	}
}
