package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/history"
)

// A rule's history stays within historyBytes however large its versions:
// twelve versions of a 60 KB rule (each entry holds the previous and the
// new fields, ~120 KB) would make ~1.4 MiB, so the oldest entries go and
// the newest stay, for admin API writes and for raw writes alike. (This
// package's test parser takes any key_resolver.)
func TestHistoryStaysWithinItsByteBudget(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	in := runStore(t, staticStore(r.URL()))
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })

	const versions = 12
	value := func(i int) string { return fmt.Sprintf("v%02d-", i) + strings.Repeat("x", 60_000) }
	for i := range versions - 1 {
		body, _ := json.Marshal(map[string]string{"qps": "5", "key_resolver": value(i)})
		if code, answer, _ := adminReq(t, in, "PUT", "/sluice/rules/rate_limit/big", string(body)); code != 200 && code != 201 {
			t.Fatalf("PUT version %d: %d %s", i, code, rulestore.Clip(answer, 64))
		}
	}
	// The last version is a raw write, recorded by the instance that sees it.
	redistest.Push(t, c, "rate_limit:rule:big", "gateway:rules:rate_limit", "big", "key_resolver", value(versions-1))

	key := "gateway:history:rate_limit:big"
	newest := func() string {
		raw, err := c.LIndex(t.Context(), key, 0).Result()
		if err != nil {
			return ""
		}
		var e history.Entry
		json.Unmarshal([]byte(raw), &e)
		return e.Fields["key_resolver"]
	}
	testcaddy.Eventually(t, 10*time.Second, "the raw write recorded", func() bool { return newest() == value(versions-1) })

	entries := c.LRange(t.Context(), key, 0, -1).Val()
	total := 0
	for _, e := range entries {
		total += len(e)
	}
	t.Logf("history: %d entries, %d bytes (budget %d)", len(entries), total, historyBytes)
	if total > historyBytes {
		t.Fatalf("history holds %d bytes, over its budget of %d", total, historyBytes)
	}
	if len(entries) >= versions || total < historyBytes/2 {
		t.Fatalf("history holds %d entries (%d bytes): want the oldest of %d dropped and about %d bytes kept",
			len(entries), total, versions, historyBytes)
	}
	// The entries kept are the newest ones, newest first, without a gap.
	for i, raw := range entries {
		var e history.Entry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := value(versions - 1 - i); e.Fields["key_resolver"] != want {
			t.Fatalf("entry %d holds %s, want %s", i, rulestore.Clip(e.Fields["key_resolver"], 64), rulestore.Clip(want, 64))
		}
	}
	// What a user reads through the admin API is the same, newest first.
	code, answer, _ := adminReq(t, in, "GET", "/sluice/rules/rate_limit/big/history", "")
	var h []history.Entry
	if code != 200 || json.Unmarshal([]byte(answer), &h) != nil || len(h) != len(entries) || h[0].Via != "redis" ||
		h[1].Via != "admin_api" {
		t.Fatalf("GET history: %d, %d entries, want %d (newest via redis, then admin_api)", code, len(h), len(entries))
	}
}
