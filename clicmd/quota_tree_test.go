package clicmd_test

import (
	"fmt"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// `caddy sluice quota-tree` against a running Caddy: a team of an org,
// after three requests, one line a level, leaf first.
func TestCLIQuotaTree(t *testing.T) {
	port := testcaddy.FreePort(t)
	p := testcaddy.Start(t, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		rate_limit org {
			qps 0.000001
			burst 10
			key_resolver {http.request.header.X-Org}
		}
		rate_limit team {
			qps 0.000001
			burst 10
			key_resolver {http.request.header.X-Team}
			parent org
			parent_key {http.request.header.X-Org}
			guarantee 50
		}
	}
}
http://127.0.0.1:%d {
	ratelimit team
	respond "ok"
}
`, port))
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for range 3 {
		if resp, body := testcaddy.Get(t, site, "X-Org: acme", "X-Team: b"); resp.StatusCode != 200 {
			t.Fatalf("request: %d %s", resp.StatusCode, body)
		}
	}
	out := mustSluice(t, p, "quota-tree", "team", "--header", "X-Org=acme", "--header", "X-Team=b")
	want := "team key0:b  ceiling 10  used 3  remaining 7  guarantee 50% (2 left)\norg key0:acme  ceiling 10  used 3  remaining 7\n"
	if out != want {
		t.Fatalf("quota-tree:\n%s\nwant\n%s", out, want)
	}
}
