// Package clicmd adds `caddy sluice …` to the caddy command: rules,
// bindings, live state and breaker overrides, through the admin API of a
// running Caddy (admin.api.sluice), so it needs no Redis access and obeys
// the admin endpoint's access controls.
package clicmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// DefaultAddress is Caddy's default admin endpoint.
const DefaultAddress = "localhost:2019"

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "sluice",
		Usage: "rules|bindings|state|store|quota|quota-tree|breaker|invalid|history|diff|rollback|verdicts|preview|apply|export ... [--address <admin>]",
		Short: "Manages Sluice rules and shows live state through the admin API",
		Long: `
Talks to the admin API of a running Caddy (default $CADDY_ADMIN as for
caddy's own commands, else localhost:2019; change it with --address) to read and write Sluice rules and route bindings, print
the live state of the rate limits, breakers and gray routes, show a key's
use of its quota, and override a breaker on that instance.

Rule kinds: rate_limit, circuit_breaker, gray, binding, and any a plugin
registers (GET /sluice/rules on the admin API lists them). Fields are given as
name=value arguments (the names of the Redis hash and the Caddyfile), or as a
JSON object with --json (use --json - to read it from stdin).

  caddy sluice rules list rate_limit
  caddy sluice rules get rate_limit order_api
  caddy sluice rules set rate_limit order_api limit_type=token_bucket qps=100 burst=110 key_resolver=userId
  caddy sluice rules delete rate_limit order_api
  caddy sluice bindings set order_route rate_limit=order_api gray=vip,ramp
  caddy sluice bindings delete order_route
  caddy sluice state [ratelimit|circuitbreaker|grayroute|rulestore]
  caddy sluice store
  caddy sluice quota order_api user:alice [--json]           # a key's limit, used, remaining, debt, reset
  caddy sluice quota-tree team --header X-Team=a             # its use at every level of a nested quota
  caddy sluice breaker order_cb force_open|force_closed|reset
  caddy sluice rules patch gray checkout-canary weight=0     # a kill switch, also for Caddyfile rules
  caddy sluice invalid                                        # rejected and missing rule ids
  caddy sluice history gray checkout-canary
  caddy sluice diff gray checkout-canary [version]
  caddy sluice rollback gray checkout-canary <version>
  caddy sluice verdicts gray checkout-canary [--wait 10s]     # each live instance's verdict; stopped ones not waited on
  caddy sluice preview rate_limit order_api qps 50 [--window 10m]  # what the change would have refused, fleet-wide
  caddy sluice apply -f rules.json|rules.yaml [--dry-run] [--prune]
  caddy sluice export [-o rules.json|rules.yaml]
  caddy sluice canary pause|resume|rollback|promote checkout_canary

With Redis configured, writes go to Redis and reach every instance; without
it they are held in the memory of the Caddy addressed (the answer says so).
`,
		CobraFunc: build,
	})
}

func build(cmd *cobra.Command) {
	// As caddy's own commands: CADDY_ADMIN, else localhost:2019.
	cmd.PersistentFlags().String("address", caddy.DefaultAdminListen, "admin API address of the Caddy to talk to (default: $CADDY_ADMIN, else "+DefaultAddress+")")
	cmd.PersistentFlags().Bool("raw", false, "print the admin API's JSON as it came (no indentation)")
	cmd.SilenceUsage = true

	rules := &cobra.Command{Use: "rules", Short: "List, get, set and delete rules"}
	rules.AddCommand(
		&cobra.Command{Use: "list <kind>", Short: "List the rules of a kind in force", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error { return call(c, "GET", rulePath(a[0], ""), nil) }},
		&cobra.Command{Use: "get <kind> <id>", Short: "Show one rule", Args: cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, a []string) error { return call(c, "GET", rulePath(a[0], a[1]), nil) }},
		withJSON(&cobra.Command{Use: "set <kind> <id> [field=value ...]", Short: "Create or replace a rule (validated)", Args: cobra.MinimumNArgs(2),
			RunE: func(c *cobra.Command, a []string) error { return set(c, rulePath(a[0], a[1]), a[2:]) }}),
		&cobra.Command{Use: "delete <kind> <id>", Short: "Delete a rule", Args: cobra.ExactArgs(2),
			RunE: func(c *cobra.Command, a []string) error { return call(c, "DELETE", rulePath(a[0], a[1]), nil) }},
		patchCommand(),
	)
	bindings := &cobra.Command{Use: "bindings", Short: "List, get, set and delete route bindings"}
	bindings.AddCommand(
		&cobra.Command{Use: "list", Short: "List the route bindings in force", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, a []string) error { return call(c, "GET", "/sluice/bindings", nil) }},
		&cobra.Command{Use: "get <route>", Short: "Show one route binding", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error { return call(c, "GET", bindingPath(a[0]), nil) }},
		withJSON(&cobra.Command{Use: "set <route> [rate_limit=<id>] [circuit_breaker=<id>] [gray=<id>,<id>]", Short: "Create or replace a route binding", Args: cobra.MinimumNArgs(1),
			RunE: func(c *cobra.Command, a []string) error { return set(c, bindingPath(a[0]), a[1:]) }}),
		&cobra.Command{Use: "delete <route>", Short: "Delete a route binding", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, a []string) error { return call(c, "DELETE", bindingPath(a[0]), nil) }},
	)
	state := &cobra.Command{Use: "state [section]", Short: "Print the live state (limiters, breakers, gray splits, store)", Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, a []string) error {
			if len(a) == 0 {
				return call(c, "GET", "/sluice/state", nil)
			}
			return section(c, a[0])
		}}
	store := &cobra.Command{Use: "store", Short: "Print the rule store's connection and counts", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, a []string) error { return call(c, "GET", "/sluice/store", nil) }}
	breaker := &cobra.Command{Use: "breaker <id> force_open|force_closed|reset", Short: "Override a circuit breaker on this instance, or reset it", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, a []string) error {
			return call(c, "POST", "/sluice/breakers/"+url.PathEscape(a[0])+"/"+url.PathEscape(a[1]), nil)
		}}
	cmd.AddCommand(rules, bindings, state, store, breaker, canaryCommand())
	cmd.AddCommand(changeCommands()...)
	cmd.AddCommand(verdictsCommand(), quotaCommand(), quotaTreeCommand(), previewCommand())
	cmd.AddCommand(applyCommands()...)
}

func withJSON(c *cobra.Command) *cobra.Command {
	c.Flags().String("json", "", "the fields as a JSON object (- reads stdin)")
	return c
}

func rulePath(kind, id string) string {
	p := "/sluice/rules/" + url.PathEscape(kind)
	if id != "" {
		p += "/" + url.PathEscape(id)
	}
	return p
}

func bindingPath(route string) string { return "/sluice/bindings/" + url.PathEscape(route) }

// set PUTs fields given as name=value arguments or with --json.
func set(c *cobra.Command, path string, args []string) error {
	js, _ := c.Flags().GetString("json")
	var body []byte
	switch {
	case js != "" && len(args) > 0:
		return fmt.Errorf("give fields as name=value arguments or with --json, not both")
	case js == "-":
		b, err := readStdin()
		if err != nil {
			return err
		}
		body = b
	case js != "":
		body = []byte(js)
	default:
		fields := map[string]string{}
		for _, a := range args {
			name, value, ok := strings.Cut(a, "=")
			if !ok || name == "" {
				return fmt.Errorf("argument %q: want field=value", a)
			}
			fields[name] = value
		}
		body, _ = json.Marshal(fields)
	}
	return writeAndWarn(c, "PUT", path, body)
}

// section prints one section of the state.
func section(c *cobra.Command, name string) error {
	body, err := request(c, "GET", "/sluice/state", nil)
	if err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		return err
	}
	part, ok := all[name]
	if !ok {
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		return fmt.Errorf("no state section %q (have %s)", name, strings.Join(names, ", "))
	}
	return print(c, part)
}

func call(c *cobra.Command, method, path string, body []byte) error {
	out, err := request(c, method, path, body)
	if err != nil {
		return err
	}
	return print(c, out)
}

// request sends one admin API request; a non-2xx answer is an error with
// the admin API's message (e.g. the field and reason of a rejected rule).
func request(c *cobra.Command, method, path string, body []byte) ([]byte, error) {
	return requestAs(c, method, path, body, http.Header{"X-Sluice-Via": {"cli"}})
}

// requestAs is request with headers: X-Sluice-Via names the writer in
// the rule's history (cli, apply), If-Match makes a write conditional.
func requestAs(c *cobra.Command, method, path string, body []byte, hdr http.Header) ([]byte, error) {
	addr, _ := c.Flags().GetString("address")
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, path, hdr, rd)
	if err != nil {
		// Errors come as "caddy responded with error: HTTP 400: {"error":...}":
		// show the admin API's message itself.
		msg, _ := strings.CutPrefix(err.Error(), "caddy responded with error: ")
		if i := strings.Index(msg, "{"); i >= 0 {
			var e struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(msg[i:]), &e) == nil && e.Error != "" {
				msg = msg[:i] + e.Error
			}
		}
		return nil, fmt.Errorf("%s %s: %s", method, path, msg)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func print(c *cobra.Command, body []byte) error {
	if raw, _ := c.Flags().GetBool("raw"); !raw {
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			body = append(bytes.TrimSpace(buf.Bytes()), '\n')
		}
	}
	_, err := c.OutOrStdout().Write(body)
	return err
}

func readStdin() ([]byte, error) { return io.ReadAll(os.Stdin) }
