package docs_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The packages whose doc comment says what they own.
var ownerPackages = []string{"ratelimit", "ratelimit/engine", "ratelimit/cluster", "ratelimit/nested", "ratelimit/replay",
	"ratelimit/overload", "ratelimit/flow", "ratelimit/settlement", "ratelimit/answer", "ratelimit/report",
	"circuitbreaker", "grayroute", "rulestore", "rulestore/rawfields", "rulestore/status", "rulestore/storeerr",
	"rulestore/missing", "rulestore/eventqueue", "internal/handlerkit"}

var goFileName = regexp.MustCompile(`[\w*]+\.go\b`)

// packageDoc returns the package comment of the Go package in dir.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if af.Doc != nil {
			doc = append(doc, af.Doc.Text())
		}
	}
	if len(doc) != 1 {
		t.Fatalf("%s: %d package comments, want one", dir, len(doc))
	}
	return doc[0]
}

// TestPackageDocsListTheirJobs: each package's doc comment lists what it
// owns, one job a bullet, each naming the files that hold it, and every
// file it names exists (so a rename that leaves the doc behind fails).
func TestPackageDocsListTheirJobs(t *testing.T) {
	for _, pkg := range ownerPackages {
		dir := filepath.Join("..", pkg)
		doc := packageDoc(t, dir)
		jobs := strings.Split(doc, "\n  - ")[1:]
		if len(jobs) < 3 {
			t.Errorf("%s: the package doc lists %d jobs, want each job it owns as a bullet:\n%s", pkg, len(jobs), doc)
			continue
		}
		for _, job := range jobs {
			names := goFileName.FindAllString(job, -1)
			if len(names) == 0 {
				t.Errorf("%s: a job names no file: %q", pkg, job)
			}
			for _, n := range names {
				m, _ := filepath.Glob(filepath.Join(dir, n))
				if len(m) == 0 {
					t.Errorf("%s: the package doc names %s, which is not in the package", pkg, n)
				}
			}
		}
	}
}
