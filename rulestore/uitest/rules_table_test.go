package uitest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The rules table counts a rejected rule the store does not hold among the
// rules ("2 of 2", not "2 of 1"), names the field once ("field qps=…", not
// "field qps: field qps=…"), and keeps version ids on one line at 1280 px.
func TestStatusPageRulesTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	r := redistest.Start(t)
	admin := testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%[1]d {
		origins localhost:%[1]d 127.0.0.1:%[1]d [::1]:%[1]d ""
	}
	persist_config off
	rulestore {
		redis %[2]s
		rate_limit t_limit {
			qps 100
			key_resolver global
		}
	}
}
`, admin, r.URL()))
	redistest.Push(t, r.Client(), "rate_limit:rule:t_ghost", "gateway:rules:rate_limit", "t_ghost",
		"limit_type", "token_bucket", "qps", "abc", "burst", "5", "key_resolver", "ip")
	p, _ := browser(t, 1280, 900)
	p.open(fmt.Sprintf("http://localhost:%d/sluice/ui/", admin))
	p.show("rules")
	p.waitFor(20*time.Second, "the rejected rule listed", `document.getElementById("rules").innerText.includes("t_ghost")`)
	if got := p.text("#rule-count"); got != "2 of 2 rules shown" {
		t.Fatalf("rule count %q, want 2 of 2 rules shown", got)
	}
	if txt := eval[string](p, `document.getElementById("rules").innerText`); strings.Contains(txt, "field qps: field qps") || !strings.Contains(txt, `field qps="abc"`) {
		t.Fatalf("rules table text:\n%s", txt)
	}
	if ws := eval[string](p, `getComputedStyle(document.querySelector("#rules td.version code")).whiteSpace`); ws != "nowrap" {
		t.Fatalf("version id white-space %q, want nowrap", ws)
	}
}
