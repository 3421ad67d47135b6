package handlerkit

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// newRequestReplacer builds a replacer as Caddy's HTTP server does for each
// request: the defaults plus one provider of its own (the http.* vars).
func newRequestReplacer() *caddy.Replacer {
	repl := caddy.NewReplacer()
	repl.Map(func(string) (any, bool) { return nil, false })
	return repl
}

func TestEmptyPlaceholders(t *testing.T) {
	repl := newRequestReplacer()
	EmptyPlaceholders(repl)
	EmptyPlaceholders(repl) // a second handler on the same request
	if got := repl.ReplaceKnown("[{http.grayroute.version}][{http.ratelimit.remaining}]", ""); got != "[][]" {
		t.Fatalf("unset placeholders: %q", got)
	}
	repl.Set("http.grayroute.version", "v2")
	if got := repl.ReplaceKnown("{http.grayroute.version}", ""); got != "v2" {
		t.Fatalf("a set placeholder must win: %q", got)
	}
	if got := repl.ReplaceKnown("{http.other}", ""); got != "{http.other}" {
		t.Fatalf("only Sluice's names: %q", got)
	}
}

// The hot path: adding the provider to a fresh request's replacer, and the
// check on a replacer that has it, allocate nothing.
func TestEmptyPlaceholdersDoesNotAllocate(t *testing.T) {
	const runs = 100
	repls := make([]*caddy.Replacer, runs+1) // AllocsPerRun runs once more to warm up
	for i := range repls {
		repls[i] = newRequestReplacer()
	}
	i := 0
	if n := testing.AllocsPerRun(runs, func() { EmptyPlaceholders(repls[i]); i++ }); n != 0 {
		t.Fatalf("fresh replacer: %v allocs per request", n)
	}
	if n := testing.AllocsPerRun(runs, func() { EmptyPlaceholders(repls[0]) }); n != 0 {
		t.Fatalf("provider already added: %v allocs per call", n)
	}
}
