package examples

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// readmeCaddyfile is the README's short Caddyfile, as printed.
func readmeCaddyfile(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "The example's Caddyfile is short:\n\n```caddyfile\n")
	if !ok {
		t.Fatal("README.md: no short Caddyfile")
	}
	cf, _, _ := strings.Cut(rest, "```")
	return cf
}

// The README's Caddyfile works as pasted, status page included: a browser
// opening the advertised http://localhost:2019/sluice/ui/ by its address
// (no Origin, no Referer) gets the page, not 403.
func TestREADMECaddyfileServesTheStatusPage(t *testing.T) {
	cf := readmeCaddyfile(t)
	if !strings.Contains(cf, "admin localhost:2019") {
		t.Fatalf("the README's Caddyfile does not configure the admin endpoint the status page link names:\n%s", cf)
	}
	cf = strings.ReplaceAll(cf, "localhost:2019", "localhost:{{admin}}")
	cf = strings.ReplaceAll(cf, "127.0.0.1:2019", "127.0.0.1:{{admin}}")
	cf = strings.ReplaceAll(cf, "[::1]:2019", "[::1]:{{admin}}")
	for _, port := range []string{"8080", "9001", "9002"} {
		cf = strings.ReplaceAll(cf, "localhost:"+port, fmt.Sprintf("localhost:%d", testcaddy.FreePort(t)))
	}
	t.Setenv("SLUICE_REDIS", "redis://127.0.0.1:1") // none: the declared rules are served
	p := testcaddy.Start(t, cf)
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://localhost:%d/sluice/ui/", p.AdminPort), nil)
	req.Header.Set("Sec-Fetch-Mode", "navigate") // a typed address: no Origin, no Referer
	resp, body := testcaddy.Do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("GET /sluice/ui/ by its address: %d %s", resp.StatusCode, body)
	}
}
