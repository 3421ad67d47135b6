package clicmd

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// A write of a rule that some live instances declare and others do not
// succeeds, but the overlay is not used where the rule is not declared
// (a rolling deploy that adds it, configs that differ by role): the
// command says where, on stderr, and exits exitNotEverywhere, as
// `verdicts --wait` does for the same fleet.

// writeAndWarn sends a rule write, prints the answer, and warns when the
// answer names live instances that do not declare the rule.
func writeAndWarn(c *cobra.Command, method, path string, body []byte) error {
	out, err := request(c, method, path, body)
	if err != nil {
		return err
	}
	if err := print(c, out); err != nil {
		return err
	}
	var res struct {
		Kind          string   `json:"kind"`
		ID            string   `json:"id"`
		DryRun        bool     `json:"dry_run"`
		NotDeclaredOn []string `json:"not_declared_on"`
	}
	if json.Unmarshal(out, &res) == nil && len(res.NotDeclaredOn) > 0 {
		warnNotDeclared(c, res.DryRun, [][3]string{{res.Kind, res.ID, strings.Join(res.NotDeclaredOn, ", ")}})
	}
	return nil
}

// warnNotDeclared prints, for each rule (kind, id, instances), where it is
// not declared, then exits exitNotEverywhere.
func warnNotDeclared(c *cobra.Command, dry bool, rules [][3]string) {
	verb := "written"
	if dry {
		verb = "would be written"
	}
	for _, r := range rules {
		fmt.Fprintf(c.ErrOrStderr(), "warning: %s %s %s, but live instance(s) %s do not declare the rule: "+
			"there the stored fields apply alone, and an overlay incomplete on its own is not used "+
			"(verdict unused) until their Caddyfile declares the rule\n", r[0], r[1], verb, r[2])
	}
	os.Exit(exitNotEverywhere)
}
