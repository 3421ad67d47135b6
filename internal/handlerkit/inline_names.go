package handlerkit

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/sluicegw/sluice/rulestore"
)

// Adapted is what a handler keeps while its Caddyfile block is adapted: the
// rules and routes it names, checked against the rulestore block, and the
// namer of its inline rules.
type Adapted struct {
	Refs  []rulestore.CaddyfileRef
	names *inlineNames
}

// Take records the rules p names and gives p's inline rules without an id
// that repeat an earlier block their name in the Caddyfile (inlineNames),
// so the adapted JSON carries it.
func (a *Adapted) Take(p *Parsed) {
	a.Refs = p.Refs
	if a.names == nil {
		return // not adapted from a whole Caddyfile (a test's dispenser)
	}
	if len(p.Inline) > 0 {
		a.names.give(p.kind, p.Inline)
	}
	for _, b := range p.Inlines {
		a.names.give(p.kind, b.Fields)
	}
}

// inlineNames names a Caddyfile's inline rules that have no id, in the
// Caddyfile's order: the first block of a kind with given fields is
// inline:<hash of the fields>, a later identical one inline:<hash>-2, -3...
// A numbered name is written into the adapted config, so it does not
// depend on the order Caddy provisions handlers in: the same Caddyfile
// names its blocks the same on every reload and every instance. The first
// block's name is the one a block without an id gets when provisioned, so
// it is left out of the JSON. Named routes are adapted with a state of
// their own; their blocks get -r1, -r2... so they never take a site
// block's name.
type inlineNames struct {
	seen  map[string]int
	route bool
}

// inlineNamesKey is where a Caddyfile's inlineNames live in the adapter's
// state.
const inlineNamesKey = "sluice.inline_names"

// inlineNamesIn returns the namer of the Caddyfile hp adapts, nil when hp
// has no adapter state.
func inlineNamesIn(hp httpcaddyfile.Helper) *inlineNames {
	if hp.State == nil {
		return nil
	}
	if n, ok := hp.State[inlineNamesKey].(*inlineNames); ok {
		return n
	}
	n := &inlineNames{seen: map[string]int{}, route: hp.IsNamedRoute()}
	hp.State[inlineNamesKey] = n
	return n
}

// give sets f's id to its numbered name unless it has an id or is the
// first of its fields.
func (n *inlineNames) give(k rulestore.Kind, f rulestore.Fields) {
	if f[InlineIDField] != "" {
		return
	}
	id := InlineID(f)
	seen := k.String() + " " + id
	n.seen[seen]++
	switch c := n.seen[seen]; {
	case n.route:
		id = fmt.Sprintf("%s-r%d", id, c)
	case c > 1:
		id = fmt.Sprintf("%s-%d", id, c)
	default:
		return
	}
	f[InlineIDField] = id
}
