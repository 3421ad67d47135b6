package clicmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// verdictsCommand is `verdicts <kind> <id> [--wait d]`: every instance's
// verdict on a rule, live or stopped; with --wait, until every live
// instance reported on the stored version. Stopped instances (their
// heartbeat expired) are shown but never waited on; a verdict without a
// heartbeat (an older release) is waited on, as before.
func verdictsCommand() *cobra.Command {
	c := &cobra.Command{Use: "verdicts <kind> <id>", Short: "Show each instance's verdict on a rule; --wait until every live instance took the stored version",
		Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, a []string) error { return verdicts(c, a[0], a[1]) }}
	c.Flags().Duration("wait", 0, "wait up to this long for every live instance's verdict on the stored version; fail if one rejected it")
	return c
}

// instanceVerdict mirrors rulestore.InstanceVerdict.
type instanceVerdict struct {
	Instance      string `json:"instance"`
	State         string `json:"state"`
	Version       string `json:"version"`
	Field         string `json:"field"`
	Error         string `json:"error"`
	At            string `json:"at"`
	Live          bool   `json:"live"`
	InstanceState string `json:"instance_state"`
}

func verdicts(c *cobra.Command, kind, id string) error {
	wait, _ := c.Flags().GetDuration("wait")
	deadline := time.Now().Add(wait)
	for {
		body, err := request(c, "GET", rulePath(kind, id)+"/verdicts", nil)
		if err != nil {
			return err
		}
		var view struct {
			Version  string            `json:"version"`
			Verdicts []instanceVerdict `json:"verdicts"`
		}
		if err := json.Unmarshal(body, &view); err != nil {
			return err
		}
		want, vs := view.Version, view.Verdicts
		var pending, rejected []string
		for _, v := range vs {
			switch {
			case v.InstanceState == "stopped":
			case v.Version != want:
				pending = append(pending, v.Instance)
			case v.State == "rejected":
				rejected = append(rejected, v.Instance)
			}
		}
		if wait == 0 || len(pending) == 0 || time.Now().After(deadline) {
			printVerdicts(c, vs, want)
			switch {
			case len(rejected) > 0:
				return fmt.Errorf("%s %s version %s rejected by %s (the last good version stays in force there)", kind, id, want, strings.Join(rejected, ", "))
			case wait > 0 && len(pending) > 0:
				return fmt.Errorf("%s %s version %s not reported within %s by live instance(s) %s", kind, id, want, wait, strings.Join(pending, ", "))
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond) // poll interval while waiting
	}
}

func printVerdicts(c *cobra.Command, vs []instanceVerdict, want string) {
	w := c.OutOrStdout()
	if len(vs) == 0 {
		fmt.Fprintln(w, "no verdicts (no instance has seen this rule in Redis)")
	}
	for _, v := range vs {
		note := ""
		switch {
		case v.InstanceState == "stopped":
			note = " (stopped: not waited on)"
		case v.Version != want:
			note = " (an older version: not seen yet)"
		}
		line := fmt.Sprintf("%-24s %-8s %-8s %s at %s", v.Instance, v.InstanceState, v.State, orNone(v.Version), v.At)
		if v.Error != "" {
			line += "  " + v.Error
		}
		fmt.Fprintln(w, line+note)
	}
}
