package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
	_ "github.com/sluicegw/sluice/rulestore/redissource" // the store's Redis source, as package sluice brings it
)

// The admin API's tests run without the handler packages: a rate_limit
// rule here takes qps (required, a number > 0) and three fields it does
// not check.
func init() {
	known := map[string]bool{"qps": true, "limit_type": true, "burst": true, "key_resolver": true}
	rulestore.RegisterParser(rulestore.RateLimit, func(id string, f rulestore.Fields) (any, error) {
		for _, name := range f.Names() {
			if !known[name] {
				return nil, f.Errorf(name, "unknown field")
			}
		}
		if f["qps"] == "" {
			return nil, f.Errorf("qps", "required")
		}
		if q, err := strconv.ParseFloat(f["qps"], 64); err != nil || q <= 0 {
			return nil, f.Errorf("qps", "want a number > 0")
		}
		return f["qps"], nil
	})
}

// instance is an in-process Caddy running only the rulestore app, read
// and written through the admin API.
type instance struct{ *testcaddy.StoreInstance }

func runStore(t *testing.T, store map[string]any) *instance {
	t.Helper()
	return &instance{testcaddy.RunStore(t, store)}
}

// rule asks the admin API for a rule; ok is false on 404.
func (in *instance) rule(kind, id string) (v ruleView, ok bool) {
	in.T.Helper()
	code, body := adminDo(in.T, in, http.MethodGet, "/sluice/rules/"+kind+"/"+id, "")
	if code == http.StatusNotFound {
		return v, false
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		in.T.Fatalf("GET rule %s %s: %d %s: %v", kind, id, code, body, err)
	}
	return v, true
}

// status asks the admin API for the store's status.
func (in *instance) status() rulestore.Status {
	in.T.Helper()
	var st rulestore.Status
	if code, body := adminDo(in.T, in, http.MethodGet, "/sluice/store", ""); code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		in.T.Fatalf("GET /sluice/store: %d %s", code, body)
	}
	return st
}

// waitQPS waits until the admin API shows the rule with this qps ("" =
// absent).
func (in *instance) waitQPS(id, qps string) {
	in.T.Helper()
	testcaddy.Eventually(in.T, 10*time.Second, fmt.Sprintf("rule %s qps=%q", id, qps), func() bool {
		v, ok := in.rule("rate_limit", id)
		return ok == (qps != "") && v.Fields["qps"] == qps
	})
}

func redisStore(url string) map[string]any {
	return map[string]any{"redis": map[string]any{"url": url}, "resync": "30s"}
}

func push(t *testing.T, c redis.Cmdable, id string, fields ...any) {
	t.Helper()
	redistest.Push(t, c, "rate_limit:rule:"+id, "gateway:rules:rate_limit", id, fields...)
}

func adminDo(t *testing.T, in *instance, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", in.Admin, path), strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The store's documented bounds on its records (docs/rulestore.md, Redis
// keys): the tests hold the store to them through the admin API.
const (
	historyLength = 50
	historyBytes  = 1 << 20
	statusTTL     = 24 * time.Hour
)
