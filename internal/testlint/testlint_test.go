package testlint

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	skipCall      = regexp.MustCompile(`\b[tb]\.Skip(f|Now)?\(`)
	sleepCall     = regexp.MustCompile(`\btime\.Sleep\(`)
	importTesting = regexp.MustCompile(`^\s*(import\s+)?(\w+\s+)?"testing"\s*$`)
)

// TestTestsFollowTheRules fails on two things in any *_test.go of the
// module and in any other Go file that imports "testing" (the helper
// packages tests run through: internal/testcaddy, internal/redistest...),
// with the fix in the message:
//   - a t.Skip / b.Skip (Skipf, SkipNow) not inside an `if testing.Short()`
//     block: outside -short a test must run or fail, never skip silently;
//   - a time.Sleep without a `// sleep: <why>` comment on the same line or
//     the line above: a test waits on a condition (testcaddy.Eventually),
//     and sleeps only where nothing can be waited on, saying why.
func TestTestsFollowTheRules(t *testing.T) {
	root := filepath.Join("..", "..")
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Base(path) == "testlint_test.go" {
			return nil
		}
		found, err := check(path)
		problems = append(problems, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// check returns the problems of one file as "file:line: what; fix".
func check(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, "_test.go") && !slices.ContainsFunc(lines, importTesting.MatchString) {
		return nil, nil // production code: not a test helper
	}
	name := filepath.ToSlash(strings.TrimPrefix(path, filepath.Join("..", "..")+string(filepath.Separator)))
	var out []string
	for i, line := range lines {
		code := strings.TrimSpace(line)
		if strings.HasPrefix(code, "//") {
			continue
		}
		if skipCall.MatchString(code) && !underShort(lines, i) {
			out = append(out, fmt.Sprintf("%s:%d: skip outside `if testing.Short() { ... }`: outside -short a test must run or fail "+
				"(t.Fatal with what to install or do); wrap the skip in `if testing.Short() {` if it only applies to -short", name, i+1))
		}
		if sleepCall.MatchString(code) && !strings.Contains(line, "// sleep:") && (i == 0 || !strings.Contains(lines[i-1], "// sleep:")) {
			out = append(out, fmt.Sprintf("%s:%d: time.Sleep without a reason: wait on a condition instead (testcaddy.Eventually), "+
				"or, if nothing can be waited on, add `// sleep: <why>` at the end of the line or on the line above", name, i+1))
		}
	}
	return out, nil
}

// underShort tells whether line i sits in an `if testing.Short()` block:
// the nearest line above it that is indented less opens that block.
func underShort(lines []string, i int) bool {
	indent := len(lines[i]) - len(strings.TrimLeft(lines[i], "\t "))
	for j := i - 1; j >= 0; j-- {
		l := lines[j]
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(l)-len(strings.TrimLeft(l, "\t ")) < indent {
			return strings.Contains(l, "testing.Short()") && strings.HasPrefix(strings.TrimSpace(l), "if ")
		}
	}
	return false
}
