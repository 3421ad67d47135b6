package testcaddy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// DryRunImpact sends a dry-run write with an impact window (path carries
// ?dry_run=true&impact=…) to the admin API on port admin and returns the
// answer's impact; anything but a 200 with an impact fails the test.
func DryRunImpact(t testing.TB, admin int, method, path, body string) *replay.Impact {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", admin, path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, out := Do(t, req)
	var a struct {
		Impact *replay.Impact `json:"impact"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(out), &a) != nil || a.Impact == nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return a.Impact
}
