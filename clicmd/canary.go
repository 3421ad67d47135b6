package clicmd

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// canaryCommand is `caddy sluice canary pause|resume|rollback|promote
// <rule>`: POST /sluice/canary/<rule>/<action> on the admin API. With Redis
// the change reaches every instance.
func canaryCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "canary pause|resume|rollback|promote <rule>",
		Short: "Pause, resume, roll back or promote a gray rule's canary (every instance with Redis)",
		RunE: func(c *cobra.Command, args []string) error {
			return fmt.Errorf("unknown canary command %q: want pause, resume, rollback or promote, then the rule id", strings.Join(args, " "))
		}}
	for _, a := range []struct{ name, short string }{
		{"pause", "Stop the automatic analysis and ramp; keep the weight"},
		{"resume", "Resume the automatic analysis and ramp"},
		{"rollback", "Send every request to the fallback version (weight 0, state rolled_back)"},
		{"promote", "Send every matching request to the target version (weight 100, state promoted)"},
	} {
		action := a.name
		cmd.AddCommand(&cobra.Command{Use: action + " <rule>", Short: a.short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				return call(c, "POST", "/sluice/canary/"+url.PathEscape(args[0])+"/"+action, nil)
			}})
	}
	return cmd
}
