package kindtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	_ "github.com/sluicegw/sluice/caddyfile" // the rulestore global option
	_ "github.com/sluicegw/sluice/clicmd"    // caddy sluice export/apply
	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// node is one in-process Caddy whose store follows Redis and declares a
// quota_note rule "declared" (limit 3) in its Caddyfile.
type node struct {
	admin int
	redis *redistest.Server
}

func caddyfile(admin int, t *testing.T, redisURL, rules string) string {
	return fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	storage file_system %s
	rulestore {
		redis %s
%s
	}
}
`, admin, t.TempDir(), redisURL, rules)
}

const declared = `		quota_note declared {
			limit 3
		}`

func start(t *testing.T) *node {
	t.Helper()
	n := &node{admin: testcaddy.FreePort(t), redis: redistest.Start(t)}
	testcaddy.Run(t, caddyfile(n.admin, t, n.redis.URL(), declared))
	return n
}

// do sends an admin API request and returns the status and body.
func (n *node) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", n.admin, path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, b := testcaddy.Do(t, req)
	return resp.StatusCode, b
}

// view is what GET /sluice/rules/quota_note/<id> answers (the fields this
// test reads).
type view struct {
	Source   string            `json:"source"`
	Static   bool              `json:"static"`
	Fields   map[string]string `json:"fields"`
	Rejected *struct {
		Field  string `json:"field"`
		Reason string `json:"reason"`
	} `json:"rejected"`
}

func (n *node) rule(t *testing.T, id string) (view, bool) {
	t.Helper()
	code, body := n.do(t, http.MethodGet, "/sluice/rules/quota_note/"+id, "")
	if code == http.StatusNotFound {
		return view{}, false
	}
	var v view
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("GET quota_note %s: %d %s", id, code, body)
	}
	return v, true
}

// A kind registered outside the store is declared in the Caddyfile (the
// app's generic rules field), read from its Redis keys and channel, and a
// bad version from Redis is rejected with its field named while the last
// good one stays in force.
func TestRegisteredKindFromConfigAndRedis(t *testing.T) {
	n := start(t)
	adapted, err := testcaddy.Adapt(caddyfile(n.admin, t, n.redis.URL(), declared))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(adapted), `"rules":{"quota_note":{"declared":{"limit":3}}}`) {
		t.Fatalf("the adapted config does not declare the rule in the rules field:\n%s", adapted)
	}
	if v, ok := n.rule(t, "declared"); !ok || !v.Static || v.Fields["limit"] != "3" {
		t.Fatalf("declared rule: %+v (found %v)", v, ok)
	}

	c := n.redis.Client()
	redistest.Push(t, c, "quota_note:rule:from_redis", "gateway:rules:quota_note", "from_redis", "limit", "5")
	testcaddy.Eventually(t, 10*time.Second, "the rule from Redis held", func() bool {
		v, ok := n.rule(t, "from_redis")
		return ok && v.Source == "redis" && v.Fields["limit"] == "5"
	})
	redistest.Push(t, c, "quota_note:rule:from_redis", "gateway:rules:quota_note", "from_redis", "limit", "0")
	testcaddy.Eventually(t, 10*time.Second, "the bad version rejected", func() bool {
		v, _ := n.rule(t, "from_redis")
		return v.Rejected != nil
	})
	v, _ := n.rule(t, "from_redis")
	if v.Rejected.Field != "limit" || v.Fields["limit"] != "5" {
		t.Fatalf("want limit named and the last good limit 5 kept, got %+v rejected %+v", v, *v.Rejected)
	}

	// A bad field in the Caddyfile fails at adapt time, named, with a hint.
	_, err = testcaddy.Adapt(caddyfile(n.admin, t, n.redis.URL(), "\t\tquota_note x {\n\t\t\tlimt 3\n\t\t}"))
	if err == nil || !strings.Contains(err.Error(), "limt") || !strings.Contains(err.Error(), "did you mean limit") {
		t.Fatalf("misspelled field: %v", err)
	}
}

// The admin API writes a rule of the registered kind to its Redis key
// (refusing a bad one, field named), caddy sluice export then apply
// brings back a deleted rule exactly, and its history records the apply.
func TestRegisteredKindAdminExportApply(t *testing.T) {
	n := start(t)
	c := n.redis.Client()
	ctx := context.Background()
	if code, body := n.do(t, http.MethodPut, "/sluice/rules/quota_note/note_b", `{"limit": 7}`); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if got := c.HGet(ctx, "quota_note:rule:note_b", "limit").Val(); got != "7" {
		t.Fatalf("Redis holds limit %q, want 7", got)
	}
	testcaddy.Eventually(t, 10*time.Second, "the written rule in force here", func() bool { // export lists the rules in force
		v, ok := n.rule(t, "note_b")
		return ok && v.Fields["limit"] == "7"
	})
	if code, body := n.do(t, http.MethodPut, "/sluice/rules/quota_note/note_b", `{"limit": "none"}`); code != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Fatalf("bad PUT: %d %s", code, body)
	}
	if code, body := n.do(t, http.MethodGet, "/sluice/rules", ""); code != http.StatusOK || !strings.Contains(body, `"quota_note"`) {
		t.Fatalf("the index does not list the kind: %d %s", code, body)
	}

	exported := filepath.Join(t.TempDir(), "rules.json")
	n.sluice(t, "export", "-o", exported)
	b, _ := os.ReadFile(exported)
	if !strings.Contains(string(b), `"note_b"`) {
		t.Fatalf("export lacks the rule:\n%s", b)
	}
	if code, body := n.do(t, http.MethodDelete, "/sluice/rules/quota_note/note_b", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if out := n.sluice(t, "apply", "-f", exported); !strings.Contains(out, "1 to write") {
		t.Fatalf("apply of the export:\n%s", out)
	}
	if got := c.HGet(ctx, "quota_note:rule:note_b", "limit").Val(); got != "7" {
		t.Fatalf("after apply Redis holds limit %q, want 7", got)
	}
	if out := n.sluice(t, "apply", "-f", exported); !strings.Contains(out, "0 to write, 0 to delete") {
		t.Fatalf("second apply:\n%s", out)
	}
	_, body := n.do(t, http.MethodGet, "/sluice/rules/quota_note/note_b/history", "")
	var history []struct{ Op, Via string }
	if err := json.Unmarshal([]byte(body), &history); err != nil || len(history) == 0 || history[0].Via != "apply" || history[0].Op != "upsert" {
		t.Fatalf("history, newest first, should start with the apply: %s", body)
	}
}

// sluice runs `caddy sluice args...` in this process (a caddy binary built
// from ./cmd/caddy would not know this package's kind) and returns stdout.
func (n *node) sluice(t *testing.T, args ...string) string {
	t.Helper()
	cmd := &cobra.Command{Use: "sluice"}
	caddycmd.Commands()["sluice"].CobraFunc(cmd)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--address", fmt.Sprintf("localhost:%d", n.admin)))
	if err := cmd.Execute(); err != nil {
		t.Fatalf("caddy sluice %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// In a JSON config the kind's rules go in the app's rules field, typed by
// the kind's Spec; a misspelled kind or field gets a hint, and a built-in
// kind is sent to its own field.
func TestRegisteredKindInJSONConfig(t *testing.T) {
	var app rulestore.App
	if err := json.Unmarshal([]byte(`{"rules": {"quota_note": {"x": {"limit": "4"}}}}`), &app); err != nil {
		t.Fatal(err)
	}
	if out, err := json.Marshal(&app); err != nil || !strings.Contains(string(out), `"rules":{"quota_note":{"x":{"limit":4}}}`) {
		t.Fatalf("round trip: %s %v", out, err)
	}
	for _, tc := range []struct{ config, want string }{
		{`{"rules": {"quota_nte": {"x": {"limit": 1}}}}`, "did you mean quota_note"},
		{`{"rules": {"quota_note": {"x": {"limt": 1}}}}`, "did you mean limit"},
		{`{"rules": {"quota_note": {"x": {"limit": "many"}}}}`, "limit"},
		{`{"rules": {"rate_limit": {"x": {"qps": 1}}}}`, "app's rate_limit field"},
	} {
		err := json.Unmarshal([]byte(tc.config), new(rulestore.App))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.config, err, tc.want)
		}
	}
}
