package caddyfile_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// snippet is one fenced code block of the docs.
type snippet struct {
	file, lang, text string
	line             int    // of the opening fence
	skip             string // reason from <!-- docs-test: skip reason -->
	parseOnly        string // reason from <!-- docs-test: parse-only reason -->
}

// docSnippets extracts every ```caddyfile and ```json block of README.md,
// docs/*.md, docs/guides/*.md and examples/*/README.md. A block right after a line
// `<!-- docs-test: skip <reason> -->` is marked skipped with that reason;
// one after `<!-- docs-test: parse-only <reason> -->` is parsed but not
// validated (validation would read files that exist only on a real host).
func docSnippets(t *testing.T) []snippet {
	t.Helper()
	var files []string
	for _, pat := range []string{"../README.md", "../docs/*.md", "../docs/guides/*.md", "../examples/*/README.md"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var out []snippet
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var cur *snippet
		prev, n := "", 0
		for sc.Scan() {
			n++
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			switch {
			case cur != nil && trimmed == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			case strings.HasPrefix(trimmed, "```"):
				lang := strings.ToLower(strings.TrimPrefix(trimmed, "```"))
				if lang == "caddyfile" || lang == "json" {
					cur = &snippet{file: strings.TrimPrefix(file, "../"), lang: lang, line: n}
					if r, ok := strings.CutPrefix(prev, "<!-- docs-test: skip"); ok {
						cur.skip = strings.TrimSpace(strings.TrimSuffix(r, "-->"))
					}
					if r, ok := strings.CutPrefix(prev, "<!-- docs-test: parse-only"); ok {
						cur.parseOnly = strings.TrimSpace(strings.TrimSuffix(r, "-->"))
					}
				} else {
					cur = &snippet{lang: "other"} // read past other blocks
				}
			}
			if trimmed != "" {
				prev = trimmed
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s.lang != "other" {
			kept = append(kept, s)
		}
	}
	return kept
}

// adaptSnippet adapts a Caddyfile snippet as it stands, else as the body of
// a site (with a Redis-backed store, so the rules it names may live in
// Redis), else as the body of the global options, else inside the global
// rulestore option; it returns the Caddyfile that adapted.
func adaptSnippet(text string) (string, error) {
	forms := []string{
		text,
		// a site body may name rules declared elsewhere: give it a store
		// with Redis, where they may live
		"{\n\trulestore {\n\t\tredis redis://127.0.0.1:1\n\t}\n}\nhttp://localhost:1 {\n" + text + "\n}\n",
		"{\n" + text + "\n}\n",
		"{\n\trulestore {\n" + text + "\n\t}\n}\n",
	}
	var first error
	for _, cf := range forms {
		if _, err := testcaddy.Adapt(cf); err == nil {
			return cf, nil
		} else if first == nil {
			first = err
		}
	}
	return "", first
}

// TestDocSnippets is the docs as tests of issue 13: every Caddyfile snippet
// adapts and validates (provisions, without Redis unless the snippet
// configures it) as `caddy validate` would; every JSON snippet is valid
// JSON, and one that is a Caddy config or a handler validates too.
func TestDocSnippets(t *testing.T) {
	snips := docSnippets(t)
	var checked, skipped int
	for _, s := range snips {
		name := fmt.Sprintf("%s:%d", s.file, s.line)
		t.Run(name, func(t *testing.T) {
			if s.skip != "" {
				skipped++
				t.Logf("marked skip: %s", s.skip)
				return
			}
			checked++
			switch s.lang {
			case "caddyfile":
				cf, err := adaptSnippet(s.text)
				if err != nil {
					t.Fatalf("does not adapt (in any wrapping): %v\n%s", err, s.text)
				}
				if s.parseOnly != "" {
					t.Logf("adapted, not validated: %s", s.parseOnly)
					return
				}
				if err := testcaddy.Validate(cf); err != nil {
					t.Fatalf("adapts but does not validate: %v\n%s", err, cf)
				}
			case "json":
				for _, doc := range jsonDocs(t, s.text) {
					if s.parseOnly != "" {
						parseJSONSnippet(t, doc)
						t.Logf("parsed, not validated: %s", s.parseOnly)
						continue
					}
					checkJSONSnippet(t, doc)
				}
			}
		})
	}
	t.Logf("%d snippets checked, %d marked skip", checked, skipped)
	if checked < 15 {
		t.Errorf("only %d snippets checked: is the extraction broken?", checked)
	}
}

// jsonDocs parses a JSON snippet: one value, or one value per line (a list
// of handler examples).
func jsonDocs(t *testing.T, text string) []string {
	t.Helper()
	if json.Valid([]byte(text)) {
		return []string{text}
	}
	var docs []string
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !json.Valid([]byte(line)) {
			var v any
			t.Fatalf("not valid JSON (neither one value nor one per line): %v\n%s", json.Unmarshal([]byte(line), &v), line)
		}
		docs = append(docs, line)
	}
	return docs
}

// parseJSONSnippet checks a JSON snippet that cannot be validated here: a
// Caddy config must unmarshal strictly, and its rulestore app too, so a
// misspelled field still fails.
func parseJSONSnippet(t *testing.T, doc string) {
	t.Helper()
	var cfg caddy.Config
	if err := caddy.StrictUnmarshalJSON([]byte(doc), &cfg); err != nil {
		t.Fatalf("not a Caddy config: %v\n%s", err, doc)
	}
	if raw, ok := cfg.AppsRaw["rulestore"]; ok {
		if err := caddy.StrictUnmarshalJSON(raw, new(rulestore.App)); err != nil {
			t.Fatalf("not a rulestore app config: %v\n%s", err, doc)
		}
	}
}

// checkJSONSnippet validates a JSON snippet that is a Caddy config, or a
// handler (in a minimal server whose rule store has Redis, so the rule it
// names may live there).
func checkJSONSnippet(t *testing.T, doc string) {
	t.Helper()
	var obj map[string]any
	_ = json.Unmarshal([]byte(doc), &obj)
	cfgJSON := ""
	switch {
	case obj["apps"] != nil:
		cfgJSON = doc
	case obj["handler"] != nil:
		cfgJSON = `{"apps": {"rulestore": {"redis": {"url": "redis://127.0.0.1:1"}}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [` + doc + `]}]}}}}}`
	default:
		return // a rule, an API answer: valid JSON is what can be checked
	}
	var cfg caddy.Config
	if err := caddy.StrictUnmarshalJSON([]byte(cfgJSON), &cfg); err != nil {
		t.Fatalf("not a Caddy config: %v\n%s", err, doc)
	}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("does not validate: %v\n%s", err, doc)
	}
}
