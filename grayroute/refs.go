package grayroute

import "github.com/sluicegw/sluice/rulestore"

// Refs lists the rules a gray rule names: its fallback_on_open breaker.
func (g *Rule) Refs() []rulestore.Ref {
	if g.FallbackOnOpen == "" {
		return nil
	}
	return []rulestore.Ref{{Field: "fallback_on_open", Kind: rulestore.CircuitBreaker, ID: g.FallbackOnOpen}}
}

var _ rulestore.Referrer = (*Rule)(nil)
