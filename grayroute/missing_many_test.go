package grayroute_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A route binding whose gray list names 1,000 rules not loaded (yet), in a
// store holding 1,000 others, does not hold up a request: each missing id is noted and its warning queued,
// and the warnings (each with a search for a close id) are written off the
// request. Before, a request wrote the 1,000 warnings itself and took
// about 10 s under -race.
func TestManyMissingGrayRulesDoNotHoldUpARequest(t *testing.T) {
	rds := redistest.Start(t)
	rc := rds.Client()
	ctx := context.Background()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("absent_%d", i)
	}
	// 1,000 other rules in the store: what a search for a close id goes
	// through.
	pipe := rc.Pipeline()
	for i := range ids {
		pipe.HSet(ctx, fmt.Sprintf("gray:rule:present_%d", i), "match_tag", "X-Present", "target_version", "v2")
	}
	pipe.HSet(ctx, "gateway:binding:many", "gray", strings.Join(ids, ","))
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	addr, url := site(t)
	adminURL := runOnRedis(t, rds.URL(), "", addr, "grayroute {\n\t\troute many\n\t}\n\t"+echoSite)
	testcaddy.Eventually(t, 10*time.Second, "the binding and the other rules loaded", func() bool {
		_, body := testcaddy.Get(t, adminURL+"/sluice/bindings/many")
		_, rule := testcaddy.Get(t, adminURL+"/sluice/rules/gray/present_999")
		return strings.Contains(body, "absent_999") && strings.Contains(rule, `"id":"present_999"`)
	})
	start := time.Now()
	if got := get(t, url); got != "v1|v1||v1" {
		t.Fatalf("no rule present: answered %q, want the default version", got)
	}
	// A hang, not a speed: the request's own work is 1,000 map lookups.
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a request through 1,000 missing rules took %v", took)
	}
	testcaddy.Eventually(t, 10*time.Second, "the missing ids listed in the state", func() bool {
		_, body := testcaddy.Get(t, adminURL+"/sluice/state")
		return strings.Contains(body, `"kind":"gray","id":"absent_0","problem":"missing"`) &&
			strings.Contains(body, `"kind":"gray","id":"absent_999","problem":"missing"`)
	})
}
