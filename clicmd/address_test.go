package clicmd_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// `caddy sluice` finds the admin API as caddy's own commands do: from
// CADDY_ADMIN when --address is not given.
func TestCLIReadsCaddyAdmin(t *testing.T) {
	p := testcaddy.Start(t, fmt.Sprintf(cliCaddyfile, "", testcaddy.FreePort(t)))
	cmd := exec.Command(testcaddy.Binary(t), "sluice", "rules", "get", "circuit_breaker", "cli_cb")
	cmd.Env = append(os.Environ(), fmt.Sprintf("CADDY_ADMIN=localhost:%d", p.AdminPort))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), `"id": "cli_cb"`) {
		t.Fatalf("with CADDY_ADMIN=localhost:%d and no --address: %v\n%s%s", p.AdminPort, err, out.String(), errb.String())
	}
}
