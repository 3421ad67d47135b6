package clicmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
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

// serverKinds are the rule kinds the addressed Caddy knows (GET
// /sluice/rules lists them), sorted: a kind a plugin registers is applied
// and exported like the built-in ones.
func serverKinds(c *cobra.Command) ([]string, error) {
	body, err := request(c, "GET", "/sluice/rules", nil)
	if err != nil {
		return nil, err
	}
	var index map[string]json.RawMessage
	if err := json.Unmarshal(body, &index); err != nil {
		return nil, err
	}
	return sortedKeys(index), nil
}

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

func readRuleSet(path string, kinds []string) (ruleSet, error) {
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
		if !slices.Contains(kinds, kind) {
			return nil, fmt.Errorf("%s: unknown rule kind %q (want %s)", path, kind, strings.Join(kinds, ", "))
		}
	}
	return set, nil
}

func isYAML(path string) bool {
	return strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")
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

// applyBody is the body of POST /sluice/apply.
type applyBody struct {
	Rules  ruleSet                      `json:"rules"`
	Prune  bool                         `json:"prune,omitempty"`
	Expect map[string]map[string]string `json:"expect,omitempty"`
}

// applyAnswer is the admin API's answer to an apply.
type applyAnswer struct {
	Applied bool   `json:"applied"`
	Error   string `json:"error"`
	Objects []struct {
		Kind, ID, Result, Reason string
		PrevVersion              string   `json:"prev_version"`
		NotDeclaredOn            []string `json:"not_declared_on"`
		Diff                     []struct{ Field, Change, Old, New string }
	} `json:"objects"`
	Counts map[string]int `json:"counts"`
}

// postApply sends one apply; an answer listing the objects is returned
// with its error, so the verdicts can be shown.
func postApply(c *cobra.Command, body applyBody, dry bool) (applyAnswer, error) {
	var ans applyAnswer
	b, _ := json.Marshal(body)
	path := "/sluice/apply"
	if dry {
		path += "?dry_run=true"
	}
	addr, _ := c.Flags().GetString("address")
	resp, err := caddycmd.AdminAPIRequest(addr, "POST", path, http.Header{"X-Sluice-Via": {"apply"}}, bytes.NewReader(b))
	if err != nil {
		// "caddy responded with error: HTTP 400: {...}": the answer is the JSON.
		msg := err.Error()
		if i := strings.Index(msg, "{"); i >= 0 && json.Unmarshal([]byte(msg[i:]), &ans) == nil && ans.Objects != nil {
			return ans, errors.New(ans.Error)
		}
		var e struct {
			Error string `json:"error"`
		}
		if i := strings.Index(msg, "{"); i >= 0 && json.Unmarshal([]byte(msg[i:]), &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return ans, fmt.Errorf("POST %s: %s", path, msg)
	}
	defer resp.Body.Close()
	return ans, json.NewDecoder(resp.Body).Decode(&ans)
}

// runApply asks the server for every object's verdict (a dry run: the
// same checks as the write), prints the diff, then, unless --dry-run,
// applies the same set guarded by the versions the dry run read, so a rule
// changed in between fails the apply and nothing is written.
func runApply(c *cobra.Command, _ []string) error {
	path, _ := c.Flags().GetString("file")
	if path == "" {
		return fmt.Errorf("give the rule set with -f <file>")
	}
	kinds, err := serverKinds(c)
	if err != nil {
		return err
	}
	set, err := readRuleSet(path, kinds)
	if err != nil {
		return err
	}
	dry, _ := c.Flags().GetBool("dry-run")
	prune, _ := c.Flags().GetBool("prune")
	w := c.OutOrStdout()

	body := applyBody{Rules: set, Prune: prune}
	plan, err := postApply(c, body, true)
	if plan.Objects == nil && err != nil {
		return err
	}
	writes, deletes, problems := showPlan(w, plan, &body)
	if len(problems) > 0 {
		return fmt.Errorf("nothing written; the rule set has errors:\n  %s", strings.Join(problems, "\n  "))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d to write, %d to delete\n", writes, deletes)
	if dry || writes+deletes == 0 {
		warnApplyNotDeclared(c, plan, true)
		return nil
	}
	res, err := postApply(c, body, false)
	if err != nil {
		return notWritten(res, err)
	}
	fmt.Fprintf(w, "applied: %d created, %d changed, %d deleted, %d unchanged\n",
		res.Counts["created"], res.Counts["changed"], res.Counts["deleted"], res.Counts["unchanged"])
	warnApplyNotDeclared(c, res, false)
	return nil
}

// showPlan prints the dry run's plan, each write and delete with its
// diff, and sets body.Expect to the versions it saw, so the real run
// writes nothing that changed since. It counts the writes and deletes
// and lists the rules that failed.
func showPlan(w io.Writer, plan applyAnswer, body *applyBody) (writes, deletes int, problems []string) {
	body.Expect = map[string]map[string]string{}
	for _, o := range plan.Objects {
		if body.Expect[o.Kind] == nil {
			body.Expect[o.Kind] = map[string]string{}
		}
		body.Expect[o.Kind][o.ID] = o.PrevVersion
		mark := ""
		switch o.Result {
		case "created":
			mark, writes = "+", writes+1
		case "changed":
			mark, writes = "~", writes+1
		case "deleted":
			mark, deletes = "-", deletes+1
		case "failed":
			problems = append(problems, fmt.Sprintf("%s %s: %s", o.Kind, o.ID, o.Reason))
			continue
		default:
			continue
		}
		fmt.Fprintf(w, "%s %s %s\n", mark, o.Kind, o.ID)
		for _, d := range o.Diff {
			switch d.Change {
			case "added":
				fmt.Fprintf(w, "    +%s=%s\n", d.Field, d.New)
			case "removed":
				fmt.Fprintf(w, "    -%s=%s\n", d.Field, d.Old)
			default:
				fmt.Fprintf(w, "    %s: %s -> %s\n", d.Field, d.Old, d.New)
			}
		}
	}
	return writes, deletes, problems
}

// notWritten is the error of an apply that wrote nothing: the rules that
// failed, or err.
func notWritten(res applyAnswer, err error) error {
	var failed []string
	for _, o := range res.Objects {
		if o.Result == "failed" {
			failed = append(failed, fmt.Sprintf("%s %s: %s", o.Kind, o.ID, o.Reason))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("nothing written:\n  %s", strings.Join(failed, "\n  "))
	}
	return fmt.Errorf("nothing written: %v", err)
}

// warnApplyNotDeclared warns about the rules of an apply that some live
// instances do not declare (notdeclared.go).
func warnApplyNotDeclared(c *cobra.Command, ans applyAnswer, dry bool) {
	var rules [][3]string
	for _, o := range ans.Objects {
		if len(o.NotDeclaredOn) > 0 {
			rules = append(rules, [3]string{o.Kind, o.ID, strings.Join(o.NotDeclaredOn, ", ")})
		}
	}
	if len(rules) > 0 {
		warnNotDeclared(c, dry, rules)
	}
}

func runExport(c *cobra.Command, _ []string) error {
	kinds, err := serverKinds(c)
	if err != nil {
		return err
	}
	set := ruleSet{}
	for _, kind := range kinds {
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
