package clicmd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// quotaCommand is `quota <rule> <key> [--json]`: GET
// /sluice/quota/{rule}/{key}, one key's use of its quota, as one line, or
// the admin API's JSON with --json.
func quotaCommand() *cobra.Command {
	c := &cobra.Command{Use: "quota <rule> <key>", Short: "Show a key's limit, used, remaining, debt and reset (a cluster rule's from Redis)",
		Long: `Shows one key's use of a rate_limit rule's quota right now: for a
local rule from the memory of the Caddy addressed, for a cluster rule from
Redis. The key is given as the rule's key_resolver builds it, e.g.
user:alice, ip:203.0.113.7, tenant:acme:/api/orders or global.`,
		Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, a []string) error { return quota(c, a[0], a[1]) }}
	c.Flags().Bool("json", false, "print the admin API's JSON answer")
	return c
}

// quotaUsage mirrors ratelimit.QuotaUsage.
type quotaUsage struct {
	Rule         string    `json:"rule"`
	Key          string    `json:"key"`
	Scope        string    `json:"scope"`
	Type         string    `json:"type"`
	Override     bool      `json:"override"`
	Limit        float64   `json:"limit"`
	Used         float64   `json:"used"`
	Remaining    int64     `json:"remaining"`
	Debt         float64   `json:"debt"`
	ResetSeconds float64   `json:"reset_seconds"`
	Reset        time.Time `json:"reset"`
	Period       string    `json:"period"`
	Tracked      bool      `json:"tracked"`
	Source       string    `json:"source"`
}

func quotaPath(rule, key string) string {
	return "/sluice/quota/" + url.PathEscape(rule) + "/" + url.PathEscape(key)
}

func quota(c *cobra.Command, rule, key string) error {
	body, err := request(c, "GET", quotaPath(rule, key), nil)
	if err != nil {
		return err
	}
	if js, _ := c.Flags().GetBool("json"); js {
		return print(c, body)
	}
	var u quotaUsage
	if err := json.Unmarshal(body, &u); err != nil {
		return err
	}
	fmt.Fprintln(c.OutOrStdout(), quotaLine(u))
	return nil
}

// quotaLine is the answer as one line:
//
//	order_api user:alice  token_bucket local  limit 5  used 3  remaining 2  debt 0  reset in 50m0s (2026-12-03T05:00:00Z)  from memory
func quotaLine(u quotaUsage) string {
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
		b.WriteString("  (untouched: whole quota)")
	}
	return b.String()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
