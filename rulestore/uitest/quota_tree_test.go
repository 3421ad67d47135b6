package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A rate_limit rule's page shows a key's use at every level of its nested
// quota: team a of org acme spent 3 (its guarantee of 2, 1 borrowed), and
// the org 3 of its 4.
func TestStatusPageQuotaTree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%[1]d {
		origins localhost:%[1]d 127.0.0.1:%[1]d [::1]:%[1]d ""
	}
	persist_config off
	rulestore {
		rate_limit org {
			qps 0.0001
			burst 4
			key_resolver global
		}
		rate_limit team {
			qps 0.0001
			burst 10
			key_resolver {http.request.header.X-Team}
			parent org
			parent_key {http.request.header.X-Org}
			guarantee 50
		}
	}
}
http://localhost:%[2]d {
	ratelimit team
	respond "ok"
}
`, admin, site))
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://localhost:%d/", site), nil)
		req.Header.Set("X-Team", "a")
		req.Header.Set("X-Org", "acme")
		if resp, _ := testcaddy.Do(t, req); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d of team a: status %d, want 200", i+1, resp.StatusCode)
		}
	}
	p, _ := browser(t, 1280, 900)
	p.open(fmt.Sprintf("http://localhost:%d/sluice/ui/#rule/rate_limit/team", admin))
	p.waitFor(20*time.Second, "the quota box", `!!document.getElementById("quota-key")`)
	eval[bool](p, `(document.getElementById("quota-key").value = "header.X-Team=a&header.X-Org=acme", true)`)
	p.click(`button[data-action="quota"]`)
	p.waitFor(10*time.Second, "the levels", `document.querySelectorAll("#quota-levels tr").length === 3 || !!document.querySelector("#quota-result .problem")`)
	rows := eval[[]string](p, `[...document.querySelectorAll("#quota-levels tr")].slice(1).map((tr) => [...tr.cells].map((c) => c.textContent.trim()).join("|"))`)
	// The page shows what the API answers: each level's key, use,
	// guarantee, guaranteed and borrowed parts, remaining and ceiling.
	_, body := testcaddy.Get(t, fmt.Sprintf("http://localhost:%d/sluice/quota_tree/team?header.X-Team=a&header.X-Org=acme", admin))
	var tree struct {
		Levels []struct {
			Rule             string  `json:"rule"`
			Key              string  `json:"key"`
			Ceiling          float64 `json:"ceiling"`
			Used             float64 `json:"used"`
			Remaining        float64 `json:"remaining"`
			GuaranteePercent float64 `json:"guarantee_percent"`
			GuaranteedUsed   float64 `json:"guaranteed_used"`
		} `json:"levels"`
	}
	if err := json.Unmarshal([]byte(body), &tree); err != nil || len(tree.Levels) != 2 {
		t.Fatalf("GET quota_tree: %v %s", err, body)
	}
	var want []string
	for _, l := range tree.Levels {
		if l.Used != 3 {
			t.Errorf("level %s: used %v, want 3", l.Rule, l.Used)
		}
		g, gu, b := "—", "—", "—"
		if l.GuaranteePercent > 0 {
			g, gu, b = fmt.Sprintf("%g%%", l.GuaranteePercent), fmt.Sprintf("%g", l.GuaranteedUsed), fmt.Sprintf("%g", l.Used-l.GuaranteedUsed)
		}
		want = append(want, fmt.Sprintf("%s|%s|%g|%s|%s|%s|%g|%g", l.Rule, l.Key, l.Used, g, gu, b, l.Remaining, l.Ceiling))
	}
	if tm, org := tree.Levels[0], tree.Levels[1]; tm.Rule != "team" || tm.Key != "key0:a" || tm.Ceiling != 10 || tm.Remaining != 7 || tm.GuaranteePercent != 50 ||
		org.Rule != "org" || org.Key != "key0:acme" || org.Ceiling != 4 || org.Remaining != 1 {
		t.Fatalf("API levels %q, want team a at 3 of 10 (guarantee 50 %%), org acme at 3 of 4", want)
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("page levels %q (result %q), want the API's %q", rows, p.text("#quota-result"), want)
	}
}
