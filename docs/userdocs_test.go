package docs_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs are the pages a user reads; docs/design/ holds the history and
// the lab notes, and is not among them.
func userDocs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"../README.md", "*.md", "../examples/*/README.md", "guides/*.md"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d user docs found: %q", len(files), files)
	}
	return files
}

// notYet are sections that keep their history until the work on them
// lands: the adaptive concurrency limit's pages are being rewritten with
// its new controller. Remove an entry when its section is rewritten.
var notYet = map[string]string{}

var (
	issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+`)
	month    = `(January|February|March|April|May|June|July|August|September|October|November|December)`
	// a heading that dates its section: "Figures: 3 December 2026",
	// "(1–2 December)", "2026-12-01"
	datedHeading = regexp.MustCompile(`(?i)^#+ .*(\d{1,2}(–\d{1,2})? ` + month + `|` + month + ` \d{1,2}\b|\b20\d\d-\d\d-\d\d\b|\bfigures: )`)
)

// TestUserDocsHaveNoIssueNumbersOrDatedSections: a user doc names no issue
// number (they mean nothing to a reader of the repository) and has no
// section headed by a date (history lives in git and docs/design/).
func TestUserDocsHaveNoIssueNumbersOrDatedSections(t *testing.T) {
	for _, file := range userDocs(t) {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		n, skip, inFence := 0, false, false
		for sc.Scan() {
			n++
			line := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if !inFence && strings.HasPrefix(line, "## ") {
				skip = notYet[file] == line
			}
			if skip {
				continue
			}
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what it is, not its issue number", file, n, m)
			}
			if !inFence && datedHeading.MatchString(line) {
				t.Errorf("%s:%d: a dated heading %q: current figures go undated, history to docs/design/", file, n, line)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDel = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors are the GitHub anchors of a page's headings.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(slugDel.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		for i := 0; ; i++ { // GitHub numbers repeated headings: x, x-1, x-2
			s := slug
			if i > 0 {
				s += "-" + string(rune('0'+i))
			}
			if !out[s] {
				out[s] = true
				break
			}
		}
	}
	return out
}

// TestUserDocLinksResolve: every relative link of a user doc or a design
// note names a file that exists, and a heading of it when it has an anchor.
func TestUserDocLinksResolve(t *testing.T) {
	design, _ := filepath.Glob("design/*.md")
	checked := 0
	for _, file := range append(userDocs(t), design...) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			full := file
			if path != "" {
				full = filepath.Join(filepath.Dir(file), path)
			}
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s: link %q: no %s", file, target, full)
				continue
			}
			if anchor != "" && strings.HasSuffix(full, ".md") && !anchors(t, full)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", file, target, full, anchor)
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	if checked < 50 {
		t.Errorf("only %d relative links found: is the extraction broken?", checked)
	}
}

// maxPageLines is the most a user doc in docs/ may hold: a reference page
// fits on a few screens, and a longer topic gets a page of its own.
const maxPageLines = 800

// TestUserDocPagesFit: no page in docs/*.md is over maxPageLines lines
// (docs/design/ holds the long notes and is not checked).
func TestUserDocPagesFit(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("only %d pages found: %q", len(pages), pages)
	}
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(raw), "\n"); n > maxPageLines {
			t.Errorf("docs/%s is %d lines, over %d: split it by topic at a ## heading", page, n, maxPageLines)
		}
	}
}
