package clicmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// A rule set is what `apply` reads and `export` writes: rules by kind, then
// id, then field, the shape of the rulestore app's JSON config:
//
//	{"rate_limit": {"order_api": {"qps": "100"}}, "binding": {"checkout": {"rate_limit": "order_api"}}}
//
// For an id declared in the Caddyfile the fields are its overlay (only the
// fields that differ); for any other id they must be a complete rule.
type ruleSet map[string]map[string]map[string]string

// kindOrder is the order of writes: rules before the bindings that name them.
var kindOrder = []string{"rate_limit", "circuit_breaker", "gray", "binding"}

func applyCommands() []*cobra.Command {
	apply := &cobra.Command{Use: "apply -f <rules.json|rules.yaml>", Short: "Make the rules in Redis (or memory) match a file: print the diff, then write through the admin API", Args: cobra.NoArgs,
		RunE: runApply}
	apply.Flags().StringP("file", "f", "", "rule set file (.json, .yaml or .yml; - reads JSON from stdin)")
	apply.Flags().Bool("dry-run", false, "validate every change and print the diff, write nothing")
	apply.Flags().Bool("prune", false, "also delete the rules held in Redis (or memory) that the file does not list")
	export := &cobra.Command{Use: "export [-o rules.json|rules.yaml]", Short: "Write the rules held in Redis (or memory) as a rule set for apply", Args: cobra.NoArgs,
		RunE: runExport}
	export.Flags().StringP("output", "o", "", "file to write (.yaml/.yml for YAML); default stdout as JSON")
	return []*cobra.Command{apply, export}
}

func readRuleSet(path string) (ruleSet, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = readStdin()
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	set := ruleSet{}
	if isYAML(path) {
		if err := yaml.Unmarshal(b, &set); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	} else {
		var raw map[string]map[string]map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("%s: want {\"<kind>\": {\"<id>\": {\"<field>\": value}}}: %v", path, err)
		}
		for kind, rules := range raw {
			set[kind] = map[string]map[string]string{}
			for id, fields := range rules {
				set[kind][id] = map[string]string{}
				for name, v := range fields {
					var s string
					if json.Unmarshal(v, &s) != nil {
						s = string(bytes.TrimSpace(v)) // a number or boolean, as written
					}
					set[kind][id][name] = s
				}
			}
		}
	}
	for kind := range set {
		if !knownKind(kind) {
			return nil, fmt.Errorf("%s: unknown rule kind %q (want %s)", path, kind, strings.Join(kindOrder, ", "))
		}
	}
	return set, nil
}

func isYAML(path string) bool {
	return strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")
}

func knownKind(k string) bool {
	for _, n := range kindOrder {
		if n == k {
			return true
		}
	}
	return false
}

// heldRule is a rule as GET /sluice/rules/{kind} lists it.
type heldRule struct {
	ID      string            `json:"id"`
	Version string            `json:"version"`
	Overlay map[string]string `json:"overlay"`
	Static  bool              `json:"static"`
}

func held(c *cobra.Command, kind string) (map[string]heldRule, error) {
	body, err := request(c, "GET", rulePath(kind, ""), nil)
	if err != nil {
		return nil, err
	}
	var list []heldRule
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	out := map[string]heldRule{}
	for _, r := range list {
		out[r.ID] = r
	}
	return out, nil
}

// step is one write of an apply.
type step struct {
	kind, id, method, ifMatch string
	body                      []byte
}

func (s step) path(extra string) string {
	p := rulePath(s.kind, s.id)
	if extra != "" {
		p += "?" + extra
	}
	return p
}

func runApply(c *cobra.Command, _ []string) error {
	path, _ := c.Flags().GetString("file")
	if path == "" {
		return fmt.Errorf("give the rule set with -f <file>")
	}
	set, err := readRuleSet(path)
	if err != nil {
		return err
	}
	dry, _ := c.Flags().GetBool("dry-run")
	prune, _ := c.Flags().GetBool("prune")
	w := c.OutOrStdout()

	var upserts, deletes []step
	var problems []string
	for _, kind := range kindOrder {
		cur, err := held(c, kind)
		if err != nil {
			return err
		}
		ids := sortedKeys(set[kind])
		for _, id := range ids {
			want := set[kind][id]
			h, exists := cur[id]
			if exists && h.Overlay != nil && equalFields(h.Overlay, want) {
				continue
			}
			body, _ := json.Marshal(want)
			s := step{kind: kind, id: id, method: "PUT", body: body}
			if exists {
				s.ifMatch = `"` + h.Version + `"`
			}
			// Validate now, all of it, before writing anything. A binding
			// may name rules this apply creates: their existence is
			// checked again when the binding is written.
			out, err := requestAs(c, "PUT", s.path("dry_run=true&allow_missing=true"), body, http.Header{"X-Sluice-Via": {"apply"}})
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			var res struct {
				Diff []struct{ Field, Change, Old, New string } `json:"diff"`
			}
			json.Unmarshal(out, &res)
			mark := "~"
			if !exists {
				mark = "+"
			}
			fmt.Fprintf(w, "%s %s %s\n", mark, kind, id)
			for _, d := range res.Diff {
				switch d.Change {
				case "added":
					fmt.Fprintf(w, "    +%s=%s\n", d.Field, d.New)
				case "removed":
					fmt.Fprintf(w, "    -%s=%s\n", d.Field, d.Old)
				default:
					fmt.Fprintf(w, "    %s: %s -> %s\n", d.Field, d.Old, d.New)
				}
			}
			upserts = append(upserts, s)
		}
		if !prune {
			continue
		}
		for _, id := range sortedKeys(cur) {
			if _, keep := set[kind][id]; keep || cur[id].Overlay == nil {
				continue // listed, or declared in the config with no overlay
			}
			what := ""
			if cur[id].Static {
				what = " (overlay; the Caddyfile's rule comes back)"
			}
			fmt.Fprintf(w, "- %s %s%s\n", kind, id, what)
			deletes = append(deletes, step{kind: kind, id: id, method: "DELETE", ifMatch: `"` + cur[id].Version + `"`})
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("nothing written; the rule set has errors:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Fprintf(w, "%d to write, %d to delete\n", len(upserts), len(deletes))
	if dry || len(upserts)+len(deletes) == 0 {
		return nil
	}
	// Rules before bindings on the way in (kindOrder); bindings before
	// rules on the way out.
	for i, j := 0, len(deletes)-1; i < j; i, j = i+1, j-1 {
		deletes[i], deletes[j] = deletes[j], deletes[i]
	}
	for _, s := range append(upserts, deletes...) {
		hdr := http.Header{"X-Sluice-Via": {"apply"}}
		if s.ifMatch != "" {
			hdr.Set("If-Match", s.ifMatch)
		}
		if _, err := requestAs(c, s.method, s.path(""), s.body, hdr); err != nil {
			return fmt.Errorf("applied up to here; stopped: %v", err)
		}
	}
	fmt.Fprintln(w, "applied")
	return nil
}

func runExport(c *cobra.Command, _ []string) error {
	set := ruleSet{}
	for _, kind := range kindOrder {
		cur, err := held(c, kind)
		if err != nil {
			return err
		}
		for id, h := range cur {
			if h.Overlay == nil {
				continue // declared in the config, nothing held in Redis
			}
			if set[kind] == nil {
				set[kind] = map[string]map[string]string{}
			}
			set[kind][id] = h.Overlay
		}
	}
	out, _ := c.Flags().GetString("output")
	var b []byte
	if isYAML(out) {
		b, _ = yaml.Marshal(set)
	} else {
		b, _ = json.MarshalIndent(set, "", "  ")
		b = append(b, '\n')
	}
	if out == "" {
		_, err := c.OutOrStdout().Write(b)
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func equalFields(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
