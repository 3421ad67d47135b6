package grayroute_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// An inline gray rule's request counts stay exported while the rule is in
// use, however the store changes: the counts of rules gone from the store
// are pruned on a store change, and an inline rule is never in the store.
// Rule tmp_g, from Redis, is deleted: its series going shows a prune ran.
func TestInlineGrayCountsSurviveStoreChanges(t *testing.T) {
	rds := redistest.Start(t)
	rc := rds.Client()
	ctx := context.Background()
	redistest.Push(t, rc, "gray:rule:tmp_g", "gateway:rules:gray", "tmp_g", "match_tag", "X-Tmp", "match_value", "yes", "target_version", "v3")
	addr, url := site(t)
	adminURL := runOnRedis(t, rds.URL(), "", addr, `grayroute {
		rule tmp_g
		gray inl_g {
			match_tag      X-Canary
			match_value    yes
			target_version v2
		}
	}
	`+echoSite)
	count := func(rule, version string) int {
		_, body := testcaddy.Get(t, adminURL+"/metrics")
		m := regexp.MustCompile(`(?m)^sluice_grayroute_requests_total\{rule="` + rule + `",version="` + version + `"\} (\d+)`).FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	send := func(n int) {
		for range n {
			if got := get(t, url, "X-Canary: yes"); !strings.HasPrefix(got, "v2|v2|inl_g|") {
				t.Fatalf("canary request answered %q, want v2 by inl_g", got)
			}
		}
	}
	testcaddy.Eventually(t, 10*time.Second, "tmp_g in force", func() bool {
		return strings.HasPrefix(get(t, url, "X-Tmp: yes"), "v3|v3|tmp_g|")
	})
	send(5)
	if n := count("inl_g", "v2"); n != 5 {
		t.Fatalf("inl_g counted %d, want 5", n)
	}
	if err := rc.Del(ctx, "gray:rule:tmp_g").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Publish(ctx, "gateway:rules:gray", "tmp_g").Err(); err != nil {
		t.Fatal(err)
	}
	testcaddy.Eventually(t, 10*time.Second, "tmp_g's counts pruned", func() bool { return count("tmp_g", "v3") < 0 })
	send(5)
	if n := count("inl_g", "v2"); n != 10 {
		t.Fatalf("after a store change inl_g counted %d after 10 requests, want 10 (-1: no series)", n)
	}
}
