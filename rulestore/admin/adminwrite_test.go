package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/history"
)

// adminReq sends one admin API request with headers "Name: value".
func adminReq(t *testing.T, in *instance, method, path, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", in.Admin, path), strings.NewReader(body))
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// staticStore is a store with one static rate_limit rule "s" (qps 5,
// burst 9) and, with url, Redis.
func staticStore(url string) map[string]any {
	st := map[string]any{"rate_limit": map[string]any{"s": map[string]any{"qps": "5", "burst": "9"}}}
	if url != "" {
		st["redis"] = map[string]any{"url": url}
	}
	return st
}

// The admin API's write semantics, with Redis and without: overlays of a
// static rule, ETag/If-Match, PATCH, dry runs, 404 and 409, the index.
func TestAdminWriteSemantics(t *testing.T) {
	for _, withRedis := range []bool{true, false} {
		t.Run(fmt.Sprintf("redis=%v", withRedis), func(t *testing.T) {
			url := ""
			var r *redistest.Server
			if withRedis {
				r = redistest.Start(t)
				url = r.URL()
			}
			in := runStore(t, staticStore(url))
			if withRedis {
				testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
			}
			waitFields := func(want string) {
				t.Helper()
				testcaddy.Eventually(t, 10*time.Second, "rule s = "+want, func() bool {
					v, _ := in.rule("rate_limit", "s")
					b, _ := json.Marshal(v.Fields)
					return string(b) == want
				})
			}

			// GET has an ETag: the version of the stored state, here the
			// rule as declared (nothing stored).
			code, body, h := adminReq(t, in, "GET", "/sluice/rules/rate_limit/s", "")
			v0 := rulestore.Version(rulestore.Fields{"qps": "5", "burst": "9"})
			if code != 200 || h.Get("ETag") != rulestore.ETag(v0) || !strings.Contains(body, `"static":true`) {
				t.Fatalf("GET: %d %s ETag=%s", code, body, h.Get("ETag"))
			}

			// A partial PUT overlays the static rule: a kill switch.
			code, body, _ = adminReq(t, in, "PUT", "/sluice/rules/rate_limit/s", `{"qps": 1}`, "If-Match: "+rulestore.ETag(v0))
			if code != 200 || !strings.Contains(body, `"diff":[{"field":"qps","change":"changed","old":"5","new":"1"}]`) {
				t.Fatalf("overlay PUT: %d %s", code, body)
			}
			waitFields(`{"burst":"9","qps":"1"}`)
			v1 := rulestore.Version(rulestore.Fields{"qps": "1"}) // the stored overlay's version

			// A stale If-Match is refused and changes nothing.
			code, body, _ = adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s", `{"qps": 2}`, "If-Match: "+rulestore.ETag(v0))
			if code != http.StatusPreconditionFailed || !strings.Contains(body, v1) {
				t.Fatalf("stale If-Match: %d %s", code, body)
			}

			// A dry run answers the parsed rule and the diff, and writes nothing.
			code, body, _ = adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s?dry_run=true", `{"qps": 7}`)
			if code != 200 || !strings.Contains(body, `"dry_run":true`) || !strings.Contains(body, `"value":{"qps":7,"burst":9}`) ||
				!strings.Contains(body, `"old":"1","new":"7"`) {
				t.Fatalf("dry run: %d %s", code, body)
			}
			// PATCH of one field, with the right If-Match.
			code, body, h = adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s", `{"burst": 3}`, "If-Match: "+rulestore.ETag(v1))
			if code != 200 || h.Get("ETag") != rulestore.ETag(rulestore.Version(rulestore.Fields{"qps": "1", "burst": "3"})) {
				t.Fatalf("PATCH: %d %s", code, body)
			}
			waitFields(`{"burst":"3","qps":"1"}`)
			// An invalid patch is refused with the field named.
			if code, body, _ = adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s", `{"qps": "fast"}`); code != 400 || !strings.Contains(body, "field qps") {
				t.Fatalf("bad PATCH: %d %s", code, body)
			}

			// DELETE of the overlay restores the static rule; a second one is 404.
			if code, body, _ = adminReq(t, in, "DELETE", "/sluice/rules/rate_limit/s", ""); code != 200 {
				t.Fatalf("DELETE: %d %s", code, body)
			}
			waitFields(`{"burst":"9","qps":"5"}`)
			if code, body, _ = adminReq(t, in, "DELETE", "/sluice/rules/rate_limit/s", ""); code != 404 || !strings.Contains(body, "declared in the config") {
				t.Fatalf("DELETE of a static rule without overlay: %d %s", code, body)
			}
			if code, body, _ = adminReq(t, in, "DELETE", "/sluice/rules/rate_limit/nope", ""); code != 404 {
				t.Fatalf("DELETE of a missing rule: %d %s", code, body)
			}
			// A rule not in the config must be complete.
			if code, body, _ = adminReq(t, in, "PUT", "/sluice/rules/rate_limit/new", `{"burst": 3}`); code != 400 || !strings.Contains(body, "must be complete") {
				t.Fatalf("incomplete new rule: %d %s", code, body)
			}
			if code, body, _ = adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/new", `{"qps": 3}`); code != 404 {
				t.Fatalf("PATCH of a missing rule: %d %s", code, body)
			}

			// A binding to a missing rule: 409, unless allow_missing.
			code, body, _ = adminReq(t, in, "PUT", "/sluice/bindings/r", `{"rate_limit": "order_apj"}`)
			if code != http.StatusConflict || !strings.Contains(body, "rate_limit order_apj") {
				t.Fatalf("binding to a missing rule: %d %s", code, body)
			}
			if code, body, _ = adminReq(t, in, "PUT", "/sluice/bindings/r?allow_missing=true", `{"rate_limit": "order_apj"}`); code != 200 {
				t.Fatalf("binding with allow_missing: %d %s", code, body)
			}
			if code, body, _ = adminReq(t, in, "PUT", "/sluice/bindings/r", `{"rate_limit": "s"}`); code != 200 {
				t.Fatalf("binding to a static rule: %d %s", code, body)
			}

			// Every change of s was recorded, newest first, with the
			// fields before and after: PUT, PATCH, DELETE.
			code, body, _ = adminReq(t, in, "GET", "/sluice/rules/rate_limit/s/history", "")
			var hist []history.Entry
			json.Unmarshal([]byte(body), &hist)
			if code != 200 || len(hist) != 3 || hist[0].Op != "delete" || !rulestore.Fields(hist[0].Prev).Equal(rulestore.Fields{"qps": "1", "burst": "3"}) ||
				!rulestore.Fields(hist[1].Fields).Equal(rulestore.Fields{"qps": "1", "burst": "3"}) || !rulestore.Fields(hist[2].Fields).Equal(rulestore.Fields{"qps": "1"}) || hist[2].Prev != nil {
				t.Fatalf("history: %d %s", code, body)
			}
			// A rollback to the first overlay writes it back.
			if code, body, _ = adminReq(t, in, "POST", "/sluice/rules/rate_limit/s/rollback?version="+hist[2].Version, ""); code != 200 {
				t.Fatalf("rollback: %d %s", code, body)
			}
			waitFields(`{"burst":"9","qps":"1"}`)

			// The index lists kinds and counts.
			testcaddy.Eventually(t, 10*time.Second, "index", func() bool {
				_, body, _ := adminReq(t, in, "GET", "/sluice/rules", "")
				return strings.Contains(body, `"binding":{"count":1,"path":"/sluice/rules/binding"}`) &&
					strings.Contains(body, `"rate_limit":{"count":1,`)
			})
		})
	}
}

// A Redis hash that is not a valid rule is reported by every instance in
// gateway:status:<kind>:<id>, listed in /sluice/state and counted in
// sluice_rules_invalid; fixing it clears both.
func TestRejectedRuleIsReportedToWriter(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	ctx := context.Background()
	in := runStore(t, staticStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })

	push(t, c, "fresh", "burst", "3") // Redis-only and incomplete
	push(t, c, "s", "qps", "-1")      // overlay with a bad value
	verdict := func(id string) rulestore.Verdict {
		var v rulestore.Verdict
		for _, js := range c.HGetAll(ctx, "gateway:status:rate_limit:"+id).Val() {
			json.Unmarshal([]byte(js), &v)
		}
		return v
	}
	testcaddy.Eventually(t, 10*time.Second, "verdicts", func() bool {
		return verdict("fresh").State == "rejected" && verdict("s").State == "rejected"
	})
	if v := verdict("s"); v.Field != "qps" || !strings.Contains(v.Error, "want a number") || v.Version != rulestore.Version(rulestore.Fields{"qps": "-1"}) {
		t.Fatalf("verdict on s: %+v", v)
	}
	if ttl := c.TTL(ctx, "gateway:status:rate_limit:s").Val(); ttl <= 0 || ttl > statusTTL {
		t.Fatalf("status TTL = %v", ttl)
	}
	code, body := adminDo(t, in, "GET", "/sluice/state", "")
	if code != 200 || !strings.Contains(body, `"id":"fresh","problem":"rejected","version"`) ||
		!strings.Contains(body, `"id":"s","problem":"rejected"`) || !strings.Contains(body, `"since":"`) {
		t.Fatalf("state: %s", body)
	}
	if got := metricValue(scrape(t, in.Admin), `sluice_rules_invalid{kind="rate_limit"}`); got != 2 {
		t.Fatalf("sluice_rules_invalid = %v, want 2", got)
	}
	// The static rule stayed in force.
	if v, _ := in.rule("rate_limit", "s"); v.Fields["qps"] != "5" {
		t.Fatalf("rule s = %v, want the static qps 5", v.Fields)
	}

	push(t, c, "s", "qps", "2")
	c.Del(ctx, "rate_limit:rule:fresh")
	c.Publish(ctx, "gateway:rules:rate_limit", "fresh")
	testcaddy.Eventually(t, 10*time.Second, "fixed", func() bool {
		return verdict("s").State == "accepted" && metricValue(scrape(t, in.Admin), `sluice_rules_invalid{kind="rate_limit"}`) == 0
	})
}

// A handler asking for a rule the store lacks (with Redis) is listed as
// missing and warned about once, not per request; it is dropped from the
// list when the rule arrives.
func TestMissingRuleListedAndWarnedOnce(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, staticStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
	app := rulestore.Active()
	for range 100 {
		app.WarnMissing(rulestore.RateLimit, "order_apj")
	}
	code, body := adminDo(t, in, "GET", "/sluice/state", "")
	if code != 200 || !strings.Contains(body, `"id":"order_apj","problem":"missing"`) {
		t.Fatalf("state: %s", body)
	}
	if got := metricValue(scrape(t, in.Admin), `sluice_rules_invalid{kind="rate_limit"}`); got != 1 {
		t.Fatalf("sluice_rules_invalid = %v, want 1", got)
	}
	in.WaitLog("rule not found", "order_apj")
	if n := strings.Count(in.Logs(), `"id":"order_apj"`); n != 1 {
		t.Fatalf("%d warnings for 100 lookups of a missing rule, want 1 a minute", n)
	}
	push(t, r.Client(), "order_apj", "qps", "3")
	testcaddy.Eventually(t, 10*time.Second, "no longer missing", func() bool {
		_, body := adminDo(t, in, "GET", "/sluice/state", "")
		return strings.Contains(body, `"invalid":[]`)
	})
}

// The history is bounded: after more changes than historyLength, the newest
// historyLength are kept, newest first, each with the fields before it.
// With Redis the list itself holds no more; without Redis memory does not.
func TestHistoryKeepsTheLastChanges(t *testing.T) {
	const writes = historyLength + 5
	for _, withRedis := range []bool{true, false} {
		t.Run(fmt.Sprintf("redis=%v", withRedis), func(t *testing.T) {
			url := ""
			var r *redistest.Server
			if withRedis {
				r = redistest.Start(t)
				url = r.URL()
			}
			in := runStore(t, staticStore(url))
			if withRedis {
				testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })
			}
			// Admin writes record their entry in the write itself, so each
			// of the writes is one entry, whatever the instance has applied.
			for i := 1; i <= writes; i++ {
				if code, body, _ := adminReq(t, in, "PATCH", "/sluice/rules/rate_limit/s", fmt.Sprintf(`{"qps": %d}`, i)); code != 200 {
					t.Fatalf("PATCH %d: %d %s", i, code, body)
				}
			}
			code, body, _ := adminReq(t, in, "GET", "/sluice/rules/rate_limit/s/history", "")
			var hist []history.Entry
			if err := json.Unmarshal([]byte(body), &hist); code != 200 || err != nil {
				t.Fatalf("history: %d %v %s", code, err, body)
			}
			if len(hist) != historyLength {
				t.Fatalf("%d entries after %d changes, want the last %d", len(hist), writes, historyLength)
			}
			for j, e := range hist {
				want := writes - j // newest first: writes, writes-1, ...
				if e.Fields["qps"] != fmt.Sprint(want) || e.Prev["qps"] != fmt.Sprint(want-1) {
					t.Fatalf("entry %d: fields %v prev %v, want qps %d after %d; history (qps prev via):\n%s",
						j, e.Fields, e.Prev, want, want-1, historySummary(hist))
				}
			}
			if withRedis {
				if n := r.Client().LLen(context.Background(), "gateway:history:rate_limit:s").Val(); n != historyLength {
					t.Fatalf("history list in Redis holds %d entries, want %d", n, historyLength)
				}
			}
		})
	}
}

// historySummary is one line per entry: new qps, previous qps, via.
func historySummary(h []history.Entry) string {
	var b strings.Builder
	for _, e := range h {
		fmt.Fprintf(&b, "%s %s %s %s\n", e.Fields["qps"], e.Prev["qps"], e.Via, e.At.Format("15:04:05.000000"))
	}
	return b.String()
}

func TestAdminWritesGoThroughRedis(t *testing.T) {
	r := redistest.Start(t)
	in := runStore(t, redisStore(r.URL()))
	code, body := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/order_api", `{"qps": 12, "limit_type": "TOKEN_BUCKET"}`)
	if code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	in.waitQPS("order_api", "12")
	ctx := context.Background()
	c := r.Client()
	if v, _ := c.HGet(ctx, "rate_limit:rule:order_api", "qps").Result(); v != "12" {
		t.Fatalf("hash qps = %q", v)
	}
	if n, _ := c.XLen(ctx, "gateway:rules").Result(); n != 1 {
		t.Fatalf("change log has %d entries, want 1", n)
	}

	code, body = adminDo(t, in, "PUT", "/sluice/rules/rate_limit/order_api", `{"qps": "lots"}`)
	if code != 400 || !strings.Contains(body, "qps") {
		t.Fatalf("bad PUT: %d %s, want 400 naming qps", code, body)
	}
	if v, _ := c.HGet(ctx, "rate_limit:rule:order_api", "qps").Result(); v != "12" {
		t.Fatalf("a rejected PUT changed Redis: qps = %q", v)
	}
	if code, _ := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/bad%20id", `{"qps": 1}`); code != 400 {
		t.Fatalf("bad id: %d", code)
	}

	if code, body := adminDo(t, in, "DELETE", "/sluice/rules/rate_limit/order_api", ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	in.waitQPS("order_api", "")
}

func TestAdminWriteWithoutRedisSaysSo(t *testing.T) {
	in := runStore(t, map[string]any{"rate_limit": map[string]any{"a": map[string]any{"qps": 5}}})
	code, body := adminDo(t, in, "PUT", "/sluice/rules/rate_limit/a", `{"qps": 1}`)
	if code != http.StatusOK || !strings.Contains(body, `"stored":"memory"`) || !strings.Contains(body, "no redis configured") {
		t.Fatalf("PUT without redis: %d %s", code, body)
	}
	if v, ok := in.rule("rate_limit", "a"); !ok || v.Fields["qps"] != "1" || v.Source != "memory" {
		t.Fatalf("after PUT: %+v", v)
	}
	// A reload keeps the in-memory rule over the static one.
	in.Reload(in.Store)
	if v, _ := in.rule("rate_limit", "a"); v.Fields["qps"] != "1" {
		t.Fatalf("after reload: %+v", v)
	}
	// Deleting it brings the static rule back; a second delete is a 404.
	if code, body := adminDo(t, in, "DELETE", "/sluice/rules/rate_limit/a", ""); code != 200 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if v, _ := in.rule("rate_limit", "a"); v.Fields["qps"] != "5" || v.Source != "static" {
		t.Fatalf("after DELETE: %+v", v)
	}
	if code, _ := adminDo(t, in, "DELETE", "/sluice/rules/rate_limit/a", ""); code != http.StatusNotFound {
		t.Fatalf("second DELETE: %d", code)
	}
}
