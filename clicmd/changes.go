package clicmd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	rulehistory "github.com/sluicegw/sluice/rulestore/history"
)

// patchCommand is `rules patch`.
func patchCommand() *cobra.Command {
	patch := withJSON(&cobra.Command{Use: "patch <kind> <id> [field=value ...] [field=]", Short: "Change single fields of a rule (field= unsets one)", Args: cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, a []string) error { return patchRule(c, a[0], a[1], a[2:]) }})
	patch.Flags().Bool("dry-run", false, "validate and print the diff, write nothing")
	return patch
}

// changeCommands are the commands that follow and undo rule changes:
// history, diff, rollback and invalid.
func changeCommands() []*cobra.Command {
	history := &cobra.Command{Use: "history <kind> <id>", Short: "List a rule's recorded changes, newest first", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, a []string) error { return printHistory(c, a[0], a[1]) }}
	diff := &cobra.Command{Use: "diff <kind> <id> [version]", Short: "Show what a rule's last change (or the change to version) did, field by field", Args: cobra.RangeArgs(2, 3),
		RunE: func(c *cobra.Command, a []string) error { return printDiff(c, a) }}
	rollback := &cobra.Command{Use: "rollback <kind> <id> <version>", Short: "Write back the fields a rule had at a recorded version", Args: rollbackArgs,
		RunE: func(c *cobra.Command, a []string) error {
			return call(c, "POST", rulePath(a[0], a[1])+"/rollback?version="+url.QueryEscape(a[2]), nil)
		}}
	invalid := &cobra.Command{Use: "invalid", Short: "List rule ids that are rejected or missing, with the reason and since when", Args: cobra.NoArgs,
		RunE: printInvalid}
	return []*cobra.Command{history, diff, rollback, invalid}
}

// rollbackArgs wants kind, id and version, and says where a version comes
// from when it is missing.
func rollbackArgs(c *cobra.Command, a []string) error {
	if len(a) == 2 {
		return fmt.Errorf("rollback needs the version to go back to: `caddy sluice history %s %s` lists them, "+
			"then `caddy sluice rollback %s %s <version>`", a[0], a[1], a[0], a[1])
	}
	return cobra.ExactArgs(3)(c, a)
}

// patchRule sends PATCH with name=value pairs; "name=" unsets a field.
func patchRule(c *cobra.Command, kind, id string, args []string) error {
	js, _ := c.Flags().GetString("json")
	body := []byte(js)
	if js == "" {
		fields := map[string]any{}
		for _, a := range args {
			name, value, ok := strings.Cut(a, "=")
			if !ok || name == "" {
				return fmt.Errorf("argument %q: want field=value (or field= to unset it)", a)
			}
			if value == "" {
				fields[name] = nil
			} else {
				fields[name] = value
			}
		}
		body, _ = json.Marshal(fields)
	}
	path := rulePath(kind, id)
	if dry, _ := c.Flags().GetBool("dry-run"); dry {
		path += "?dry_run=true"
	}
	return writeAndWarn(c, "PATCH", path, body)
}

// history reads a rule's recorded changes, newest first.
func history(c *cobra.Command, kind, id string) ([]rulehistory.Entry, error) {
	body, err := request(c, "GET", rulePath(kind, id)+"/history", nil)
	if err != nil {
		return nil, err
	}
	var h []rulehistory.Entry
	return h, json.Unmarshal(body, &h)
}

func printHistory(c *cobra.Command, kind, id string) error {
	if raw, _ := c.Flags().GetBool("raw"); raw {
		return call(c, "GET", rulePath(kind, id)+"/history", nil)
	}
	h, err := history(c, kind, id)
	if err != nil {
		return err
	}
	w := c.OutOrStdout()
	if len(h) == 0 {
		fmt.Fprintf(w, "no recorded changes of %s %s\n", kind, id)
		printDeclared(c, kind, id)
		return nil
	}
	for _, e := range h {
		v := e.Version
		if v == "" {
			v = "(deleted)"
		}
		fmt.Fprintf(w, "%s  %-14s %-6s %-9s by %s on %s  %s\n", e.At.Format(time.RFC3339Nano), v, e.Op, e.Via, e.Instance, kind+" "+id, formatFields(e.Fields))
	}
	return nil
}

// printDeclared names the declared version of a rule the config declares,
// the way back from any overlay (one every instance rejected included).
func printDeclared(c *cobra.Command, kind, id string) {
	body, err := request(c, "GET", rulePath(kind, id), nil)
	if err != nil {
		return
	}
	var v struct {
		DeclaredVersion string `json:"declared_version"`
	}
	if json.Unmarshal(body, &v) != nil || v.DeclaredVersion == "" {
		return
	}
	fmt.Fprintf(c.OutOrStdout(), "declared in the config as version %s: `caddy sluice rollback %s %s %s` goes back to it\n",
		v.DeclaredVersion, kind, id, v.DeclaredVersion)
}

func printDiff(c *cobra.Command, a []string) error {
	h, err := history(c, a[0], a[1])
	if err != nil {
		return err
	}
	for _, e := range h {
		if len(a) == 3 && e.Version != a[2] {
			continue
		}
		fmt.Fprintf(c.OutOrStdout(), "%s %s: %s -> %s (%s, %s at %s)\n", a[0], a[1], orNone(e.PrevVersion), orNone(e.Version), e.Op, e.Via, e.At.Format(time.RFC3339Nano))
		writeFieldDiff(c, e.Prev, e.Fields)
		return nil
	}
	if len(a) == 3 {
		return fmt.Errorf("no version %s in the history of %s %s", a[2], a[0], a[1])
	}
	return fmt.Errorf("no recorded changes of %s %s", a[0], a[1])
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// writeFieldDiff prints one line per changed field: -name=old, +name=new.
func writeFieldDiff(c *cobra.Command, old, cur map[string]string) {
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range cur {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	w := c.OutOrStdout()
	for _, n := range sorted {
		ov, inOld := old[n]
		nv, inNew := cur[n]
		if inOld && inNew && ov == nv {
			continue
		}
		if inOld {
			fmt.Fprintf(w, "  -%s=%s\n", n, ov)
		}
		if inNew {
			fmt.Fprintf(w, "  +%s=%s\n", n, nv)
		}
	}
}

func formatFields(f map[string]string) string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + f[n]
	}
	return strings.Join(parts, " ")
}

func printInvalid(c *cobra.Command, _ []string) error {
	body, err := request(c, "GET", "/sluice/state", nil)
	if err != nil {
		return err
	}
	var st struct {
		Rulestore struct {
			Invalid []struct {
				Kind, ID, Problem, Version, Field, Reason, Since string
			} `json:"invalid"`
		} `json:"rulestore"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return err
	}
	w := c.OutOrStdout()
	if len(st.Rulestore.Invalid) == 0 {
		fmt.Fprintln(w, "no rejected or missing rules")
		return nil
	}
	for _, r := range st.Rulestore.Invalid {
		fmt.Fprintf(w, "%-8s %s %s since %s: %s\n", r.Problem, r.Kind, r.ID, r.Since, r.Reason)
	}
	return nil
}
