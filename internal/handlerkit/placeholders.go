package handlerkit

import "github.com/caddyserver/caddy/v2"

// placeholdersKnown is answered by every Sluice provider, so a handler can
// tell that one is already in a request's replacer.
const placeholdersKnown = "sluice.placeholders"

// Fresh reports whether no Sluice handler has added its placeholder
// provider to this request's replacer yet (false without a replacer). The
// first Sluice handler on a request adds one provider (Provide, or
// EmptyPlaceholders); every later one sets its values (SetAll).
func Fresh(repl *caddy.Replacer) bool {
	if repl == nil {
		return false
	}
	_, ok := repl.Get(placeholdersKnown)
	return !ok
}

// EmptyPlaceholders makes every Sluice placeholder known on this request,
// as "" until a handler sets it. A handler that never ran (the rate limit or
// the breaker answered first) then leaves its placeholders empty, not
// literal, in `header >X-Served-Version {http.grayroute.version}`, logs and
// error routes. Values set with repl.Set win: the static map comes before
// providers added by Map. The provider is added once per request, without
// allocating (the replacer's provider slice has room for it).
func EmptyPlaceholders(repl *caddy.Replacer) {
	if Fresh(repl) {
		repl.Map(emptyPlaceholder)
	}
}

// Values are one handler's placeholders for one request, held by value:
// Placeholder answers the names the handler decided (false for the others).
type Values interface {
	Placeholder(key string) (any, bool)
}

// Publish makes v's placeholders readable on this request. On a fresh
// request (see Fresh) it adds one provider that answers from v, lazily:
// nothing is formatted or boxed unless a placeholder is read, and every
// other Sluice placeholder reads "". Otherwise an earlier Sluice handler's
// provider answers first, so each of names that v answers is set (a value
// set wins over every provider, so the later handler's value is read, as
// when every handler sets its values). v is copied into the provider: a
// value type of at most 128 bytes is held in the provider's one allocation.
func Publish[V Values](repl *caddy.Replacer, fresh bool, v V, names []string) {
	switch {
	case repl == nil:
	case fresh:
		repl.Map(func(key string) (any, bool) {
			if val, ok := v.Placeholder(key); ok {
				return val, true
			}
			return emptyPlaceholder(key)
		})
	default:
		SetAll(repl, v, names)
	}
}

// SetAll sets each of names that v answers.
func SetAll[V Values](repl *caddy.Replacer, v V, names []string) {
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
