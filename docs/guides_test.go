package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tasks the README's "What do you want to do" links to, one guide each.
var guideTasks = []string{
	"login-brute-force.md", "llm-gateway.md", "public-api-daily-quota.md",
	"canary-release.md", "fleet-on-redis.md", "monitoring.md",
}

var testFunc = regexp.MustCompile(`\bTest[A-Z]\w*`)

// TestGuides: every guide is linked from the README under "What do you
// want to do", fits on a few screens, and ends with the tests that run its
// example, each a test function that exists in the Go files the paragraph
// links to (or in the example's directory).
func TestGuides(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, task, ok := strings.Cut(string(readme), "## What do you want to do\n")
	if !ok {
		t.Fatal(`README.md: no "## What do you want to do" section`)
	}
	task, _, _ = strings.Cut(task, "\n## ")
	guides, _ := filepath.Glob("guides/*.md")
	if len(guides) < len(guideTasks) {
		t.Errorf("%d guides, want at least %d: %q", len(guides), len(guideTasks), guides)
	}
	for _, g := range guideTasks {
		if _, err := os.Stat(filepath.Join("guides", g)); err != nil {
			t.Errorf("guide %s: %v", g, err)
		}
	}
	for _, g := range guides {
		if !strings.Contains(task, "(docs/"+g+")") {
			t.Errorf("README.md: %q does not link %s", "What do you want to do", g)
		}
		raw, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(raw), "\n"); n > 100 {
			t.Errorf("%s: %d lines; a guide fits on a few screens (≤ 100), the reference pages hold the rest", g, n)
		}
		_, tested, ok := strings.Cut(string(raw), "**Tested by:**")
		if !ok {
			t.Errorf("%s: no **Tested by:** paragraph naming the tests that run its example", g)
			continue
		}
		tested, _, _ = strings.Cut(tested, "\n\n")
		names := testFunc.FindAllString(tested, -1)
		if len(names) == 0 {
			t.Errorf("%s: **Tested by:** names no test", g)
		}
		var code strings.Builder
		for _, m := range mdLink.FindAllStringSubmatch(tested, -1) {
			target := filepath.Join("guides", m[1])
			files := []string{target}
			if fi, err := os.Stat(target); err == nil && fi.IsDir() {
				files, _ = filepath.Glob(filepath.Join(target, "*_test.go"))
			}
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil {
					code.Write(b)
				}
			}
		}
		for _, n := range names {
			if !strings.Contains(code.String(), "func "+n+"(") {
				t.Errorf("%s: names %s, which is not a test in the files it links", g, n)
			}
		}
	}
}
