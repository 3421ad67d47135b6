package examples_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The README's tour, run as printed against examples/Caddyfile (ports
// moved to the test's): every command followed by a "# → <output>" line
// prints exactly that output, on every run.
func TestREADMETourOutput(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## A 5-minute tour")
	if start < 0 {
		t.Fatal("README.md: no tour")
	}
	block := doc[start:]
	block = block[strings.Index(block, "```sh")+len("```sh"):]
	block = block[:strings.Index(block, "```")]
	lines := strings.Split(block, "\n")
	ex := runExample(t, "redis://127.0.0.1:1") // the Caddyfile's rules
	gw, admin := strings.TrimPrefix(ex.gateway, "http://"), strings.TrimPrefix(ex.admin, "http://")
	checked := 0
	for i := 0; i+1 < len(lines); i++ {
		want, ok := strings.CutPrefix(lines[i+1], "# → ")
		if !ok {
			continue
		}
		cmdline := strings.NewReplacer("localhost:8080", gw, "localhost:2019", admin).Replace(lines[i])
		out, err := exec.Command("bash", "-c", cmdline).CombinedOutput()
		if err != nil {
			t.Fatalf("README tour: %s: %v\n%s", lines[i], err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("README tour: %s\nprints %q\nREADME says %q", lines[i], got, want)
		}
		checked++
	}
	if checked != 3 {
		t.Fatalf("README tour: %d commands with their output checked, want 3", checked)
	}
}
