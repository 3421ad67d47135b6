package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureListsEveryPackage holds docs/architecture.md's package
// table to the module's packages: every package has a row, and every row
// names a package.
func TestArchitectureListsEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "github.com/sluicegw/sluice"), "/")
		if p == "" {
			p = "."
		}
		pkgs = append(pkgs, p)
	}
	raw, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)`(?: \\([^)]*\\))? \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		listed = append(listed, m[1])
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s has no row in docs/architecture.md", p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("docs/architecture.md lists %s, which is not a package of the module", p)
		}
	}
}
