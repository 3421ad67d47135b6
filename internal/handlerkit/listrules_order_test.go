package handlerkit_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	_ "github.com/sluicegw/sluice/grayroute" // parses gray rules
	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// A list directive keeps rule ids and inline blocks in the order written,
// each inline block an entry with its id and fields, and records the
// rules its inline fields name (fallback_on_open).
func TestListDirectiveKeepsOrder(t *testing.T) {
	dir := handlerkit.Directive{Name: "grayroute", Kind: rulestore.Gray, List: "gray", ListOnly: true, ListNeedsID: true,
		RefFields: map[string]rulestore.Kind{"fallback_on_open": rulestore.CircuitBreaker}}
	p, err := dir.ParseCaddyfile(caddyfile.NewTestDispenser(
		"grayroute a {\n rule b\n gray g {\n  target_version v2\n  fallback_on_open cb\n }\n rule c\n}"))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := handlerkit.ToSelection[*rulestore.GraySpec](p)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range sel.Rules {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != "a b g c" || !sel.Rules[2].HasInline() || sel.Rules[2].Inline.TargetVersion != "v2" || sel.Rules[1].HasInline() {
		t.Fatalf("rules %v: %+v", ids, sel.Rules)
	}
	if len(p.Refs) != 4 || p.Refs[2].Kind != rulestore.CircuitBreaker || p.Refs[2].ID != "cb" {
		t.Fatalf("refs %+v", p.Refs)
	}
}
