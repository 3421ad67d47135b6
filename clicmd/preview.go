package clicmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// previewCommand is `caddy sluice preview <kind> <id> field value …`: a
// dry-run PATCH of the fields with an impact window, printing what the
// changed rule would have done to the fleet's recent traffic.
func previewCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "preview <kind> <id> <field> <value> [<field> <value> ...]",
		Short: "Replay the recent traffic against a changed rule, without writing it",
		Long: `Replays each live instance's record of the rule's recent traffic against
the rule in force and the rule with these fields changed (a dry-run PATCH
with ?impact=<window>), and prints the fleet's summed impact: requests newly
refused and newly allowed, the keys most affected, and how many instances
answered. Fields are pairs (qps 50) or name=value arguments (qps=50).`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(c *cobra.Command, a []string) error {
			fields, err := previewFields(a[2:])
			if err != nil {
				return err
			}
			window, _ := c.Flags().GetDuration("window")
			asJSON, _ := c.Flags().GetBool("json")
			body, _ := json.Marshal(fields)
			path := rulePath(a[0], a[1]) + "?dry_run=true&impact=" + url.QueryEscape(window.String())
			out, err := request(c, "PATCH", path, body)
			if err != nil {
				return err
			}
			if asJSON {
				return print(c, out)
			}
			var res struct {
				Impact *replay.Impact `json:"impact"`
			}
			if err := json.Unmarshal(out, &res); err != nil || res.Impact == nil {
				return fmt.Errorf("the admin API answered no impact: %s", clipOut(out))
			}
			printImpact(c.OutOrStdout(), a[0], a[1], res.Impact)
			return nil
		},
	}
	c.Flags().Duration("window", 10*time.Minute, "how much recent traffic to replay (at most 10m)")
	c.Flags().Bool("json", false, "print the admin API's whole answer (diff and impact) as JSON")
	return c
}

// previewFields reads fields given as pairs (qps 50) or name=value.
func previewFields(args []string) (map[string]string, error) {
	fields := map[string]string{}
	for i := 0; i < len(args); i++ {
		if name, value, ok := strings.Cut(args[i], "="); ok && name != "" {
			fields[name] = value
			continue
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("field %q has no value: give <field> <value> pairs", args[i])
		}
		fields[args[i]] = args[i+1]
		i++
	}
	return fields, nil
}

// printImpact prints an impact as the operator reads it.
func printImpact(w io.Writer, kind, id string, imp *replay.Impact) {
	fmt.Fprintf(w, "impact of the change to %s %s over the last %s: %d of %d instances answered\n",
		kind, id, imp.Window, imp.Instances.Answered, imp.Instances.Asked)
	fmt.Fprintf(w, "  requests          %d\n", imp.Requests)
	fmt.Fprintf(w, "  refused now       %d (recorded %d)\n", imp.RefusedNow, imp.RefusedRecorded)
	fmt.Fprintf(w, "  refused proposed  %d\n", imp.RefusedProposed)
	fmt.Fprintf(w, "  newly refused     %d (%d keys)\n", imp.NewlyRefused, imp.KeysNewlyRefused)
	fmt.Fprintf(w, "  newly allowed     %d (%d keys)\n", imp.NewlyAllowed, imp.KeysNewlyAllowed)
	if len(imp.TopKeys) > 0 {
		fmt.Fprintln(w, "  top keys          newly refused  newly allowed")
		for _, k := range imp.TopKeys {
			fmt.Fprintf(w, "    %-24s %8d %14d\n", k.Key, k.NewlyRefused, k.NewlyAllowed)
		}
	}
	if len(imp.Versions) > 0 {
		fmt.Fprintln(w, "  versions          share now  share proposed  requests moved in  keys moved in")
		for _, v := range imp.Versions {
			fmt.Fprintf(w, "    %-14s %12.1f%% %14.1f%% %18d %14d\n", v.Version, 100*v.ShareNow, 100*v.ShareProposed, v.RequestsMoved, v.KeysMoved)
		}
	}
	for _, r := range imp.Approximate {
		fmt.Fprintf(w, "  approximate: %s\n", r)
	}
}

func clipOut(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
