package handlerkit

import "github.com/caddyserver/caddy/v2"

// placeholdersKnown is answered by emptyPlaceholder, so a handler can tell
// that the provider is already in a request's replacer.
const placeholdersKnown = "sluice.placeholders"

// EmptyPlaceholders makes every Sluice placeholder known on this request,
// as "" until a handler sets it. A handler that never ran (the rate limit or
// the breaker answered first) then leaves its placeholders empty, not
// literal, in `header >X-Served-Version {http.grayroute.version}`, logs and
// error routes. Values set with repl.Set win: the static map comes before
// providers added by Map. Each Sluice handler calls it at the top of
// ServeHTTP; the provider is added once per request, without allocating (the
// replacer's provider slice has room for it).
func EmptyPlaceholders(repl *caddy.Replacer) {
	if repl == nil {
		return
	}
	if _, ok := repl.Get(placeholdersKnown); ok {
		return
	}
	repl.Map(emptyPlaceholder)
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
