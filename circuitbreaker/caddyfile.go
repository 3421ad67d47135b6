package circuitbreaker

import (
	"errors"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// ParseCaddyfile parses the circuitbreaker directive.
var ParseCaddyfile = handlerkit.Parser[Handler]("circuitbreaker")

// Adapting is what the handler keeps while its Caddyfile block is adapted.
func (h *Handler) Adapting() *handlerkit.Adapted { return &h.adapted }

// UnmarshalCaddyfile reads:
//
//	circuitbreaker [<matcher>] <rule-id>
//	circuitbreaker [<matcher>] {
//		rule <id> | route <name> | [id <id>] <rule fields...>
//		header <name> <value>   # repeatable; the open response's headers
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	headerLines := false
	dir := handlerkit.Directive{Name: "circuitbreaker", Kind: rulestore.CircuitBreaker,
		// Each header line adds to the headers field.
		Line: func(tok caddyfile.Token, name string, args []string, p *handlerkit.Parsed) (bool, error) {
			_, given := p.Inline["headers"]
			switch {
			case name == "headers" && headerLines, name == "header" && given && !headerLines:
				return true, errors.New("use headers or header lines, not both")
			case name != "header":
				return false, nil
			case len(args) < 2:
				return true, errors.New("header wants <name> <value>")
			}
			headerLines = true
			p.Field(tok, "headers", args[0]+": "+strings.Join(args[1:], " "), "; ")
			return true, nil
		}}
	p, err := dir.ParseCaddyfile(d)
	if err != nil {
		return err
	}
	h.adapted.Take(p)
	sel, err := handlerkit.ToSelection[*rulestore.CircuitBreakerSpec](p)
	h.Rule, h.Route, h.Inline, h.OnMissingRule = sel.Rule, sel.Route, sel.Inline, sel.OnMissingRule
	return err
}
