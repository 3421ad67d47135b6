package clicmd

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// verdictsCommand is `verdicts <kind> <id> [--wait d]`: every instance's
// verdict on a rule, live or stopped; with --wait, until every live
// instance reported on the stored version. Stopped instances (their
// heartbeat expired) are shown but never waited on; a verdict without a
// heartbeat (an older release) is waited on, as before.
// exitNotEverywhere is verdicts' exit status when every live instance
// that declares the rule took the version and the others do not use it.
const exitNotEverywhere = 2

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
		var pending, rejected, unused []string
		for _, v := range vs {
			switch {
			case v.InstanceState == "stopped":
			case notUsed(v, want):
				unused = append(unused, v.Instance) // settled: it serves nothing under the id
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
			case len(unused) > 0:
				// Not a failure (a rolling deploy that adds the rule), but not
				// the whole fleet either: exit 2, saying where it does not apply.
				fmt.Fprintf(c.ErrOrStderr(), "%s %s version %s is not used by live instance(s) %s: their config does not declare the rule, "+
					"so they serve nothing under it (an overlay applies there once their Caddyfile declares the rule)\n", kind, id, orNone(want), strings.Join(unused, ", "))
				os.Exit(exitNotEverywhere)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond) // poll interval while waiting
	}
}

// notUsed reports whether an instance's verdict says it serves nothing
// under the id while the answering instance serves version want: it does
// not declare the rule, and the stored overlay is incomplete there (state
// unused), or nothing is stored (unused, or deleted, on no version).
func notUsed(v instanceVerdict, want string) bool {
	switch v.State {
	case "unused":
		return v.Version == want || v.Version == ""
	case "deleted":
		return v.Version == "" && want != ""
	}
	return false
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
		case notUsed(v, want):
			note = " (not used here: this instance does not declare the rule)"
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
