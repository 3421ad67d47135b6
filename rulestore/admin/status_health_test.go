package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A resync re-reads every bad rule: that is no new rejection, so the
// rejection count stays put, and the status page learns the refused fields
// and the keys skipped for an invalid id.
func TestResyncsDoNotRecountRejections(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	st := staticStore(r.URL())
	st["resync"] = "1s"
	in := runStore(t, st)
	testcaddy.Eventually(t, 10*time.Second, "connected", func() bool { return in.status().Connected })

	push(t, c, "fresh", "burst", "3") // Redis-only and incomplete
	push(t, c, "s", "qps", "-1")      // overlay with a bad value
	if err := c.Set(context.Background(), "rate_limit:rule:str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(context.Background(), "rate_limit:rule:bad id", "qps", "1").Err(); err != nil {
		t.Fatal(err)
	}
	testcaddy.Eventually(t, 10*time.Second, "3 rejections and the skipped key", func() bool {
		_, body := in.uiGet("/sluice/ui/overview.json")
		return in.status().Rejected >= 3 && strings.Contains(body, `"id":"bad id","problem":"skipped"`)
	})
	before := in.status()
	testcaddy.Eventually(t, 20*time.Second, "5 more resyncs", func() bool { return in.status().Resyncs >= before.Resyncs+5 })
	if after := in.status(); before.Rejected != 3 || after.Rejected != 3 {
		t.Fatalf("rejections counted: %d, then %d after %d resyncs; want 3 both times", before.Rejected, after.Rejected, after.Resyncs-before.Resyncs)
	}
	if code, body := adminDo(t, in, "GET", "/sluice/state", ""); code != 200 || !strings.Contains(body, `"stored":{"qps":"-1"}`) {
		t.Fatalf("state: %d %s, want the refused fields of s", code, body)
	}
}
