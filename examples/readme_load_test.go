package examples_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var heyLine = regexp.MustCompile(`(?m)^hey (-z \d+s) (-q \d+ -c \d+) http://localhost:(\d{4})(/\S*)`)

// TestProtectDownstreamREADMELoad runs the load line of
// examples/protect-downstream/README.md (hey, which make test installs),
// for 2 s instead of 10, against the example's adaptive gateway: every
// request is answered, by the service (200) or by the in-flight limit
// (503), and at least 10 are served (hey -c 1 sends one at a time).
func TestProtectDownstreamREADMELoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Caddy and hey; skipped under -short")
	}
	hey, err := exec.LookPath("hey")
	if err != nil {
		t.Fatal("hey not found: run scripts/ensure-hey.sh (make test does)")
	}
	raw, err := os.ReadFile("protect-downstream/README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := heyLine.FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("protect-downstream/README.md: no hey line")
	}
	s := startScenario(t, "protect-downstream", 9001, 8080)
	startUpstream(t, s.port[9001], "-capacity", "10", "-work", "1ms")
	port, _ := strconv.Atoi(m[3])
	args := append([]string{"-z", "2s"}, strings.Fields(m[2])...)
	args = append(args, s.url(port)+m[4])
	out, err := exec.Command(hey, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hey %v: %v\n%s", args, err, out)
	}
	codes := map[string]int{}
	for _, c := range regexp.MustCompile(`\[(\d{3})\]\s+(\d+) responses`).FindAllStringSubmatch(string(out), -1) {
		codes[c[1]], _ = strconv.Atoi(c[2])
	}
	if codes["200"] < 10 || len(codes) > 2 || (len(codes) == 2 && codes["503"] == 0) || strings.Contains(string(out), "Error distribution") {
		t.Fatalf("hey %v: status codes %v, want mostly 200 (503 from the limit only)\n%s", args, codes, out)
	}
	t.Logf("hey against %s: %v", fmt.Sprint(args), codes)
}
