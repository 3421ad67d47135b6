package handlerkit

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/rulestore"
)

// A list directive's own options are called at their line and listed, in table order, after
// the selection's lines when a line is unknown.
func TestListDirectiveOptionsAndChecks(t *testing.T) {
	var got string
	dir := Directive{Name: "grayroute", Kind: rulestore.Gray, List: "gray", ListOnly: true, ListNeedsID: true,
		Options: []Option{{Name: "header", Parse: func(d *caddyfile.Dispenser) error {
			d.NextArg()
			got = d.Val()
			return nil
		}}}}
	parse := func(src string) (*Parsed, error) {
		return dir.ParseCaddyfile(caddyfile.NewTestDispenser(src))
	}
	p, err := parse("grayroute a {\n rule b c\n header X-V\n}")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ToSelection[*rulestore.GraySpec](p)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range sel.Rules {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != "a b c" || len(p.Refs) != 3 || got != "X-V" {
		t.Fatalf("rules %v refs %d header %q", ids, len(p.Refs), got)
	}
	for src, want := range map[string]string{
		"grayroute {\n colour red\n}":                      "(want rule, route, gray, header, on_missing_rule), at Testfile:2",
		"grayroute a {\n route r\n}":                       "grayroute: give either a route or rules, not both",
		"grayroute":                                        "grayroute: no gray rules: give rule ids, inline gray rules or a route",
		"grayroute a {\n rule b a\n}":                      `grayroute: gray rule "a" listed twice, at Testfile:2`,
		"grayroute {\n route r\n route s\n}":               "grayroute: route given twice, at Testfile:3",
		"grayroute {\n gray {\n  target_version v2\n }\n}": "grayroute: gray needs a rule id",
	} {
		if _, err := parse(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

func TestSelectionValidateList(t *testing.T) {
	ref := Refs[*rulestore.GraySpec]
	for _, c := range []struct {
		route string
		refs  []RuleRef[*rulestore.GraySpec]
		want  string
	}{
		{"r", ref("a"), "either a route or rules"},
		{"", nil, "no gray rules"},
		{"", ref("a", "a"), `gray rule "a" listed twice`},
	} {
		s := Selection[*rulestore.GraySpec]{Route: c.route, Rules: c.refs}
		if err := s.Validate("grayroute", rulestore.Gray); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c, err, c.want)
		}
	}
	s := Selection[*rulestore.GraySpec]{Route: "r"}
	if err := s.Validate("grayroute", rulestore.Gray); err != nil {
		t.Errorf("a route alone: %v", err)
	}
}
