package clicmd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicegw/sluice/ratelimit"
)

// quotaTreeCommand is `quota-tree <rule> [<key>] [--json]`: GET
// /sluice/quota_tree/{rule}/{key}, a key's use at every level of its
// nested quota, one line a level, leaf first.
func quotaTreeCommand() *cobra.Command {
	c := &cobra.Command{Use: "quota-tree <rule> [<key>]", Short: "Show a key's use at every level of its nested quota (used, remaining, guarantee)",
		Long: `Shows a key's use at every level of its tree of nested quotas (a rule
with a parent): each level's ceiling, used and remaining, and the
guarantee at its parent with what is left of it, as the Caddy addressed
counts them. Give the key as stored, or request values as for quota when
a level finds its parent's key by parent_key:

  caddy sluice quota-tree team --header X-Org=acme --header X-Team=b`,
		Args: cobra.RangeArgs(1, 2), RunE: func(c *cobra.Command, a []string) error {
			key := ""
			if len(a) == 2 {
				key = a[1]
			}
			return quotaTree(c, a[0], key)
		}}
	c.Flags().Bool("json", false, "print the admin API's JSON answer")
	for _, kind := range []string{"header", "query", "cookie"} {
		c.Flags().StringArray(kind, nil, "a request "+kind+" name=value the keys are resolved from (repeatable)")
	}
	for _, name := range []string{"ip", "path", "host"} {
		c.Flags().String(name, "", "the request "+name+" the keys are resolved from")
	}
	return c
}

func quotaTree(c *cobra.Command, rule, key string) error {
	vals, err := quotaValues(c) // quota.go
	if err != nil {
		return err
	}
	path := "/sluice/quota_tree/" + url.PathEscape(rule) + "/" + url.PathEscape(key)
	switch {
	case key == "" && len(vals) == 0:
		return fmt.Errorf("quota-tree needs the key as stored or request values (--header X-Team=a)")
	case key != "" && len(vals) > 0:
		return fmt.Errorf("give the key or request values, not both")
	case key == "":
		path = "/sluice/quota_tree/" + url.PathEscape(rule) + "?" + vals.Encode()
	}
	body, err := request(c, "GET", path, nil)
	if err != nil {
		return err
	}
	if js, _ := c.Flags().GetBool("json"); js {
		return print(c, body)
	}
	var t ratelimit.QuotaTree
	if err := json.Unmarshal(body, &t); err != nil {
		return err
	}
	for _, lv := range t.Levels {
		fmt.Fprintln(c.OutOrStdout(), quotaLevelLine(&lv))
	}
	return nil
}

// quotaLevelLine is one level as a line:
//
//	team key0:acme/b  ceiling 10  used 1  remaining 9  guarantee 50% (4 left)
func quotaLevelLine(lv *ratelimit.QuotaLevel) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s  ceiling %s  used %s  remaining %s", lv.Rule, lv.Key, num(lv.Ceiling), num(lv.Used), num(lv.Remaining))
	if lv.GuaranteePercent > 0 {
		fmt.Fprintf(&b, "  guarantee %s%% (%s left)", num(lv.GuaranteePercent), num(lv.GuaranteeLeft))
	}
	if !lv.Tracked {
		b.WriteString("  (never seen: whole)")
	}
	return b.String()
}
