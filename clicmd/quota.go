package clicmd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicegw/sluice/ratelimit"
)

// quotaCommand is `quota <rule> <key> [--json]`: GET
// /sluice/quota/{rule}/{key}, one key's use of its quota, as one line, or
// the admin API's JSON with --json.
func quotaCommand() *cobra.Command {
	c := &cobra.Command{Use: "quota <rule> <key>", Short: "Show a key's limit, used, remaining, debt and reset (a cluster rule's from Redis)",
		Long: `Shows one key's use of a rate_limit rule's quota right now: for a
local rule from the memory of the Caddy addressed, for a cluster rule from
Redis. The key is given as stored (user:alice, ip:203.0.113.7,
tenant:acme:/api/orders, global; a key given without the prefix the
rule's key_resolver adds is found under it), or, without a key, as the
rule's key_resolver resolves a request carrying the values given with
--header, --query, --cookie, --ip, --path, --host:

  caddy sluice quota login_failures --header X-Login-User=alice

The answer names the key looked up and how, and says "never seen" when no
state exists for it.`,
		Args: cobra.RangeArgs(1, 2), RunE: func(c *cobra.Command, a []string) error {
			key := ""
			if len(a) == 2 {
				key = a[1]
			}
			return quota(c, a[0], key)
		}}
	c.Flags().Bool("json", false, "print the admin API's JSON answer")
	c.Flags().StringArray("header", nil, "a request header Name=value the key is resolved from (repeatable)")
	c.Flags().StringArray("query", nil, "a query parameter name=value the key is resolved from (repeatable)")
	c.Flags().StringArray("cookie", nil, "a cookie name=value the key is resolved from (repeatable)")
	c.Flags().String("ip", "", "the client IP the key is resolved from")
	c.Flags().String("path", "", "the request path the key is resolved from")
	c.Flags().String("host", "", "the request host the key is resolved from")
	return c
}

// quotaValues is the query of request values from the flags.
func quotaValues(c *cobra.Command) (url.Values, error) {
	v := url.Values{}
	for _, kind := range []string{"header", "query", "cookie"} {
		pairs, _ := c.Flags().GetStringArray(kind)
		for _, p := range pairs {
			name, value, ok := strings.Cut(p, "=")
			if !ok || name == "" {
				return nil, fmt.Errorf("--%s %q: want name=value", kind, p)
			}
			v.Add(kind+"."+name, value)
		}
	}
	for _, name := range []string{"ip", "path", "host"} {
		if s, _ := c.Flags().GetString(name); s != "" {
			v.Set(name, s)
		}
	}
	return v, nil
}

func quotaPath(rule, key string) string {
	return "/sluice/quota/" + url.PathEscape(rule) + "/" + url.PathEscape(key)
}

func quota(c *cobra.Command, rule, key string) error {
	vals, err := quotaValues(c)
	if err != nil {
		return err
	}
	path := quotaPath(rule, key)
	switch {
	case key == "" && len(vals) == 0:
		return fmt.Errorf("quota needs the key as stored (caddy sluice quota %s user:alice) or request values (caddy sluice quota %s --header X-User-Id=alice)", rule, rule)
	case key != "" && len(vals) > 0:
		return fmt.Errorf("give the key or request values (--header, --query, --cookie, --ip, --path, --host), not both")
	case key == "":
		path = "/sluice/quota/" + url.PathEscape(rule) + "?" + vals.Encode()
	}
	body, err := request(c, "GET", path, nil)
	if err != nil {
		return err
	}
	if js, _ := c.Flags().GetBool("json"); js {
		return print(c, body)
	}
	u := ratelimit.QuotaAnswer{QuotaUsage: new(ratelimit.QuotaUsage)}
	if err := json.Unmarshal(body, &u); err != nil {
		return err
	}
	fmt.Fprintln(c.OutOrStdout(), quotaLine(u.QuotaUsage))
	if u.Key != u.Given {
		fmt.Fprintf(c.OutOrStdout(), "looked up %s: %s (given %s)\n", u.Key, u.LookedUp, u.Given)
	}
	if u.Note != "" {
		fmt.Fprintln(c.OutOrStdout(), u.Note)
	}
	return nil
}

// quotaLine is the answer as one line:
//
//	order_api user:alice  token_bucket local  limit 5  used 3  remaining 2  debt 0  reset in 50m0s (2026-12-03T05:00:00Z)  from memory
func quotaLine(u *ratelimit.QuotaUsage) string {
	typ := u.Type
	if u.Period != "" {
		typ += "/" + u.Period
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s  %s %s  limit %s", u.Rule, u.Key, typ, u.Scope, num(u.Limit))
	if u.Override {
		b.WriteString(" (override)")
	}
	fmt.Fprintf(&b, "  used %s  remaining %d  debt %s  reset in %s (%s)  from %s",
		num(u.Used), u.Remaining, num(u.Debt), time.Duration(u.ResetSeconds*float64(time.Second)).Round(time.Second),
		u.Reset.UTC().Format(time.RFC3339), u.Source)
	if !u.Tracked {
		b.WriteString("  (never seen)")
	}
	return b.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
