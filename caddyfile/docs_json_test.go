package caddyfile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// jsonOfAbove marks a docs JSON block as the JSON form of the Caddyfile
// block just above it: the rulestore app and the Sluice handlers it adapts
// to. TestDocJSONForms checks every such pair; UPDATE_DOCS=1 rewrites them.
const (
	jsonOfAbove = "<!-- docs-test: json of the caddyfile above -->"
	sameInJSON  = "The same in JSON:"
)

// sluiceJSON is the part of an adapted config a reader of the docs needs:
// the rulestore app (unless only the test's wrapping added it) and the
// Sluice handlers in route order.
func sluiceJSON(t *testing.T, snippet, adapted string) []byte {
	t.Helper()
	cfgJSON, err := testcaddy.Adapt(adapted)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if rs, ok := cfg.Apps["rulestore"]; ok && strings.Contains(snippet, "rulestore") {
		out["rulestore"] = json.RawMessage(rs)
	}
	var handlers []any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			switch x["handler"] {
			case "ratelimit", "circuitbreaker", "grayroute":
				handlers = append(handlers, x)
				return
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys) // servers srv0, srv1... in order
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	var apps map[string]any
	_ = json.Unmarshal(cfgJSON, &struct {
		Apps *map[string]any `json:"apps"`
	}{&apps})
	walk(apps["http"])
	if len(handlers) > 0 {
		out["handlers"] = handlers
	}
	b, err := json.MarshalIndent(out, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDocJSONForms(t *testing.T) {
	update := os.Getenv("UPDATE_DOCS") == "1"
	pairs := 0
	for _, file := range docFiles(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		var out []string
		for i := 0; i < len(lines); i++ {
			line := lines[i]
			out = append(out, line)
			if strings.TrimSpace(line) != "```caddyfile" || i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "<!-- docs-test: skip") {
				continue
			}
			start := i
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				out = append(out, lines[i])
			}
			if i < len(lines) {
				out = append(out, lines[i])
			}
			snippet := strings.Join(lines[start+1:i], "\n") + "\n"
			// Is a JSON form next?
			j := i + 1
			for j < len(lines) && (strings.TrimSpace(lines[j]) == "" || strings.TrimSpace(lines[j]) == sameInJSON) {
				j++
			}
			has := j+1 < len(lines) && strings.TrimSpace(lines[j]) == jsonOfAbove && strings.TrimSpace(lines[j+1]) == "```json"
			if !has && !update {
				continue
			}
			cf, err := adaptSnippet(snippet)
			if err != nil {
				if has {
					t.Errorf("%s:%d: does not adapt: %v", file, start+1, err)
				}
				continue
			}
			want := sluiceJSON(t, snippet, cf)
			if bytes.Equal(want, []byte("{}")) {
				continue
			}
			pairs++
			if has {
				k := j + 2
				for k < len(lines) && strings.TrimSpace(lines[k]) != "```" {
					k++
				}
				got := strings.Join(lines[j+2:k], "\n")
				var g, w any
				if err := json.Unmarshal([]byte(got), &g); err != nil {
					t.Errorf("%s:%d: JSON form is not JSON: %v", file, j+2, err)
				}
				_ = json.Unmarshal(want, &w)
				if !update && !reflect.DeepEqual(g, w) {
					t.Errorf("%s:%d: the JSON form differs from what the Caddyfile above adapts to; want:\n%s", file, j+2, want)
				}
				if update {
					out = append(out, "", sameInJSON, "", jsonOfAbove, "```json", string(want), "```")
					i = k
				}
				continue
			}
			out = append(out, "", sameInJSON, "", jsonOfAbove, "```json", string(want), "```")
		}
		if update {
			if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pairs < 10 && !update {
		t.Errorf("only %d Caddyfile blocks with a JSON form", pairs)
	}
	t.Logf("%d Caddyfile blocks checked against their JSON form", pairs)
}

func docFiles(t *testing.T) []string {
	var files []string
	for _, s := range docSnippets(t) {
		f := "../" + s.file
		if len(files) == 0 || files[len(files)-1] != f {
			files = append(files, f)
		}
	}
	return files
}
