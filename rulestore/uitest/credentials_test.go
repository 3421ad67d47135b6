package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"golang.org/x/crypto/bcrypt"
)

// sluice_status behind basic_auth opened with the credentials in the URL
// (http://ops:s3cret@host/sluice/ui/): the page polls and renders, no
// "Request cannot be constructed from a URL that includes credentials".
func TestStatusPageWithCredentialsInTheURL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts chromium")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost) // Caddy's default cost takes seconds here
	if err != nil {
		t.Fatal(err)
	}
	admin, site := testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	admin localhost:%d
	persist_config off
	rulestore {
		rate_limit c_limit {
			qps 100
			key_resolver global
		}
	}
}
http://127.0.0.1:%d {
	route /sluice/* {
		basic_auth {
			ops %s
		}
		sluice_status
	}
}
`, admin, site, hash))
	p, consoleErrors := browser(t, 1280, 900)
	p.open(fmt.Sprintf("http://ops:s3cret@127.0.0.1:%d/sluice/ui/", site))
	p.afterPolls(2)
	if errs := eval[int64](p, `window.sluiceStats.errors`); errs != 0 {
		t.Fatalf("%d failed polls; console: %q", errs, consoleErrors())
	}
	p.show("rules")
	p.waitFor(10*time.Second, "the rule listed", `document.getElementById("rules").innerText.includes("c_limit")`)
}
