package handlerkit

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// How a request's Sluice placeholders are held. The first Sluice handler on
// a request adds one provider to the replacer (Publish, or
// EmptyPlaceholders) and says so in Caddy's vars map, which the server makes
// with the replacer for each request, under placeholdersKnown (naming the
// replacer, so that a vars map seen with another replacer is not trusted); a
// later handler reads that entry (one map lookup) instead of asking the
// replacer's providers one by one. The provider Publish adds holds the first
// handler's values; a later handler of another kind leaves its values in its
// kind's slot of the vars map, where the provider reads them. Every value is
// formatted only when read. Where nothing else works (the request has no
// vars map, the first handler added EmptyPlaceholders' provider, which
// cannot read the slots, or the kind's slot is taken) a later handler sets
// its values with Replacer.Set, as every handler once did.

// placeholdersKnown is answered by every Sluice provider, and is the vars
// entry that says which provider the request's replacer has.
const placeholdersKnown = "sluice.placeholders"

// Kind is a kind of Sluice handler with placeholders of its own: a later
// handler of that kind on a request leaves its values in the kind's slot.
type Kind uint8

const (
	RateLimit Kind = iota // {http.ratelimit.*}
	GrayRoute             // {http.grayroute.*}
)

// kinds are each Kind's placeholder prefix and its slot in the vars map.
var kinds = [...]struct{ prefix, slot string }{
	RateLimit: {"http.ratelimit.", "sluice.placeholders.ratelimit"},
	GrayRoute: {"http.grayroute.", "sluice.placeholders.grayroute"},
}

// emptyOnly in the vars map: the replacer has EmptyPlaceholders' provider,
// which answers "" and reads no slot. (A struct of one pointer goes into an
// interface without allocating.)
type emptyOnly struct{ repl *caddy.Replacer }

// Placeholders are where a handler publishes its placeholders on one
// request: the request's replacer and Caddy's vars map (nil outside a
// server, e.g. in a unit test: then the replacer's providers are asked).
type Placeholders struct {
	repl *caddy.Replacer
	vars map[string]any
}

// PlaceholdersOf returns r's, whose replacer is repl (nil: nothing is
// published).
func PlaceholdersOf(r *http.Request, repl *caddy.Replacer) Placeholders {
	if repl == nil {
		return Placeholders{}
	}
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	return Placeholders{repl: repl, vars: vars}
}

// PlaceholdersIn is PlaceholdersOf for a handler that looked up the
// request's vars map already.
func PlaceholdersIn(repl *caddy.Replacer, vars map[string]any) Placeholders {
	if repl == nil {
		return Placeholders{}
	}
	return Placeholders{repl: repl, vars: vars}
}

// provider says which Sluice provider the request's replacer has.
type provider uint8

const (
	noProvider    provider = iota
	slotsProvider          // Publish's: reads the kinds' slots
	emptyProvider          // EmptyPlaceholders', or one found without a vars map
	staleProvider          // none, but the vars map says another replacer had one
)

func (p Placeholders) provider() provider {
	if p.vars == nil {
		if _, ok := p.repl.Get(placeholdersKnown); ok {
			return emptyProvider
		}
		return noProvider
	}
	switch m := p.vars[placeholdersKnown].(type) {
	case *caddy.Replacer:
		if m == p.repl {
			return slotsProvider
		}
		return staleProvider
	case emptyOnly:
		if m.repl == p.repl {
			return emptyProvider
		}
		return staleProvider
	}
	return noProvider
}

// EmptyPlaceholders makes every Sluice placeholder known on this request,
// as "" until a handler sets it. A handler that never ran (the rate limit or
// the breaker answered first) then leaves its placeholders empty, not
// literal, in `header >X-Served-Version {http.grayroute.version}`, logs and
// error routes. Values set with repl.Set win: the static map comes before
// providers added by Map. The provider is added once per request, without
// allocating (the replacer's provider slice has room for it).
func EmptyPlaceholders(p Placeholders) {
	if p.repl == nil {
		return
	}
	if pr := p.provider(); pr != noProvider && pr != staleProvider {
		return
	}
	p.repl.Map(emptyPlaceholder)
	if p.vars != nil {
		p.vars[placeholdersKnown] = emptyOnly{p.repl}
	}
}

// Values are one handler's placeholders for one request, held by value:
// Placeholder answers the names the handler decided (false for the others).
type Values interface {
	Placeholder(key string) (any, bool)
}

// Publish makes v, the placeholders of a handler of kind k, readable on
// this request, lazily: nothing is formatted unless a placeholder is read.
// The request's first Sluice handler adds one provider that answers from v
// (a value type of at most 128 bytes is held in the provider's one
// allocation) and "" for every Sluice placeholder no handler set. A later
// handler of another kind leaves v in its kind's slot (boxed: no allocation
// when V is pointer-shaped). Otherwise each of names that v answers is set;
// a value set wins over every provider, so, as with the slot, the later
// handler's value is the one read, and an earlier handler's stays readable
// for a name the later one does not answer.
func Publish[V Values](p Placeholders, k Kind, v V, names []string) {
	if p.repl == nil {
		return
	}
	switch pr := p.provider(); pr {
	case noProvider, staleProvider:
		vars := p.vars
		if pr == staleProvider {
			for _, kind := range kinds {
				delete(vars, kind.slot) // another replacer's
			}
		}
		p.repl.Map(func(key string) (any, bool) {
			if vars != nil {
				if val, ok := fromSlot(vars, key); ok {
					return val, true
				}
			}
			if val, ok := v.Placeholder(key); ok {
				return val, true
			}
			return emptyPlaceholder(key)
		})
		if vars != nil {
			vars[placeholdersKnown] = p.repl
		}
	case slotsProvider:
		slot := kinds[k].slot
		if _, taken := p.vars[slot]; !taken {
			p.vars[slot] = v
			return
		}
		setAll(p.repl, v, names)
	default:
		setAll(p.repl, v, names)
	}
}

// fromSlot answers key from its kind's slot, if a later handler filled it.
func fromSlot(vars map[string]any, key string) (any, bool) {
	if !strings.HasPrefix(key, "http.") {
		return nil, false
	}
	for _, kind := range kinds {
		if strings.HasPrefix(key, kind.prefix) {
			if v, ok := vars[kind.slot].(Values); ok {
				return v.Placeholder(key)
			}
			return nil, false
		}
	}
	return nil, false
}

// setAll sets each of names that v answers.
func setAll[V Values](repl *caddy.Replacer, v V, names []string) {
	for _, name := range names {
		if val, ok := v.Placeholder(name); ok {
			repl.Set(name, val)
		}
	}
}

func emptyPlaceholder(key string) (any, bool) {
	switch key {
	case placeholdersKnown:
		return true, true
	case "http.ratelimit.rule", "http.ratelimit.key", "http.ratelimit.remaining", "http.ratelimit.limit",
		"http.ratelimit.result", "http.ratelimit.retry_after",
		"http.circuitbreaker.state", "http.circuitbreaker.rule",
		"http.grayroute.version", "http.grayroute.rule":
		return "", true
	}
	return nil, false
}
