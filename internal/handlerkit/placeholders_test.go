package handlerkit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// newRequestReplacer builds a replacer as Caddy's HTTP server does for each
// request: the defaults plus one provider of its own (the http.* vars).
func newRequestReplacer() *caddy.Replacer {
	repl := caddy.NewReplacer()
	repl.Map(func(string) (any, bool) { return nil, false })
	return repl
}

// newServerRequest prepares a request as Caddy's HTTP server does: a new
// replacer with the server's providers, and the vars map beside it.
func newServerRequest() (*http.Request, *caddy.Replacer) {
	repl := caddy.NewReplacer()
	r := caddyhttp.PrepareRequest(httptest.NewRequest("GET", "/", nil), repl, httptest.NewRecorder(), nil)
	return r, repl
}

// bothWays runs f on a request as Caddy's server prepares it and on a bare
// replacer without a vars map (as a unit test builds one).
func bothWays(t *testing.T, f func(t *testing.T, p Placeholders, repl *caddy.Replacer)) {
	t.Run("server", func(t *testing.T) {
		r, repl := newServerRequest()
		f(t, PlaceholdersOf(r, repl), repl)
	})
	t.Run("no vars", func(t *testing.T) {
		repl := newRequestReplacer()
		f(t, Placeholders{repl: repl}, repl)
	})
}

func TestEmptyPlaceholders(t *testing.T) {
	bothWays(t, func(t *testing.T, p Placeholders, repl *caddy.Replacer) {
		EmptyPlaceholders(p)
		EmptyPlaceholders(p) // a second handler on the same request
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
	})
}

// The hot path: adding the provider to a fresh request's replacer, and the
// check on a replacer that has it, allocate nothing.
func TestEmptyPlaceholdersDoesNotAllocate(t *testing.T) {
	const runs = 100
	ps := make([]Placeholders, runs+1) // AllocsPerRun runs once more to warm up
	for i := range ps {
		r, repl := newServerRequest()
		ps[i] = PlaceholdersOf(r, repl)
	}
	i := 0
	if n := testing.AllocsPerRun(runs, func() { EmptyPlaceholders(ps[i]); i++ }); n != 0 {
		t.Fatalf("fresh replacer: %v allocs per request", n)
	}
	if n := testing.AllocsPerRun(runs, func() { EmptyPlaceholders(ps[0]) }); n != 0 {
		t.Fatalf("provider already added: %v allocs per call", n)
	}
}

// rateValues and grayValues stand in for two handler kinds' values:
// remaining is answered only when set, as a rate limit's is only when a
// quota was consulted.
type rateValues struct{ rule, remaining string }

func (v rateValues) Placeholder(key string) (any, bool) {
	switch key {
	case "http.ratelimit.rule":
		return v.rule, true
	case "http.ratelimit.remaining":
		return v.remaining, v.remaining != ""
	}
	return nil, false
}

var rateNames = []string{"http.ratelimit.rule", "http.ratelimit.remaining"}

type grayValues struct{ version string }

func (v *grayValues) Placeholder(key string) (any, bool) {
	if key == "http.grayroute.version" {
		return v.version, true
	}
	return nil, false
}

var grayNames = []string{"http.grayroute.version"}

const shown = "[{http.ratelimit.rule}][{http.ratelimit.remaining}][{http.grayroute.version}][{http.circuitbreaker.state}]"

// Each handler's values are read, a later handler's win name by name (an
// earlier one's stay for a name the later does not answer), a kind that
// never ran reads "", and a value the user set wins over all of them.
func TestPublishLayers(t *testing.T) {
	bothWays(t, func(t *testing.T, p Placeholders, repl *caddy.Replacer) {
		check := func(step, want string) {
			t.Helper()
			if got := repl.ReplaceKnown(shown, ""); got != want {
				t.Fatalf("%s:\n got %s\nwant %s", step, got, want)
			}
		}
		Publish(p, RateLimit, rateValues{"a", "5"}, rateNames)
		check("first handler", "[a][5][][]")
		EmptyPlaceholders(p) // the breaker, later
		check("breaker after it", "[a][5][][]")
		Publish(p, GrayRoute, &grayValues{"v2"}, grayNames)
		check("another kind", "[a][5][v2][]")
		Publish(p, RateLimit, rateValues{rule: "b"}, rateNames)
		check("the same kind again", "[b][5][v2][]")
		Publish(p, RateLimit, rateValues{"c", "7"}, rateNames)
		check("and a third time", "[c][7][v2][]")
		Publish(p, RateLimit, rateValues{rule: "d"}, rateNames)
		check("and a fourth", "[d][7][v2][]")
		repl.Set("http.grayroute.version", "mine")
		Publish(p, GrayRoute, &grayValues{"v3"}, grayNames)
		if got := repl.ReplaceKnown("{http.grayroute.version}", ""); got != "v3" {
			// A later handler's Set replaces a user's value, as it always did.
			t.Fatalf("gray after a user's Set and a second gray: %q", got)
		}
		if got := repl.ReplaceKnown("{http.other}", ""); got != "{http.other}" {
			t.Fatalf("only Sluice's names: %q", got)
		}
	})
}

// A value the user sets before any Sluice handler decides wins over the
// provider's, whichever handler publishes it.
func TestPublishUserSetWins(t *testing.T) {
	bothWays(t, func(t *testing.T, p Placeholders, repl *caddy.Replacer) {
		repl.Set("http.ratelimit.rule", "user")
		repl.Set("http.grayroute.version", "user")
		Publish(p, RateLimit, rateValues{"a", "5"}, rateNames)
		Publish(p, GrayRoute, &grayValues{"v2"}, grayNames)
		want := "[user][5][user][]"
		if p.vars == nil {
			// Without the vars map a later handler sets its values, as every
			// handler once did.
			want = "[user][5][v2][]"
		}
		if got := repl.ReplaceKnown(shown, ""); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}

// After EmptyPlaceholders' provider (the breaker first), a later handler
// sets its values: they are read, and every other name still reads "".
func TestPublishAfterEmpty(t *testing.T) {
	bothWays(t, func(t *testing.T, p Placeholders, repl *caddy.Replacer) {
		EmptyPlaceholders(p)
		Publish(p, RateLimit, rateValues{rule: "a"}, rateNames)
		Publish(p, GrayRoute, &grayValues{"v2"}, grayNames)
		if got, want := repl.ReplaceKnown(shown, ""), "[a][][v2][]"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}

// A vars map that speaks of another replacer (one the request no longer
// uses) is not trusted: the new replacer gets its own provider, and the old
// one's slots are not read.
func TestPublishOtherReplacer(t *testing.T) {
	r, old := newServerRequest()
	Publish(PlaceholdersOf(r, old), RateLimit, rateValues{"a", "5"}, rateNames)
	Publish(PlaceholdersOf(r, old), GrayRoute, &grayValues{"v2"}, grayNames)
	repl := newRequestReplacer()
	Publish(PlaceholdersOf(r, repl), RateLimit, rateValues{rule: "b"}, rateNames)
	if got, want := repl.ReplaceKnown(shown, ""), "[b][][][]"; got != want {
		t.Fatalf("new replacer: got %s, want %s", got, want)
	}
	Publish(PlaceholdersOf(r, repl), GrayRoute, &grayValues{"v3"}, grayNames)
	if got, want := repl.ReplaceKnown(shown, ""), "[b][][v3][]"; got != want {
		t.Fatalf("new replacer, later handler: got %s, want %s", got, want)
	}
}

// On a request as the server prepares it: the first handler's provider is
// its one allocation, and a later handler of another kind whose values are
// a pointer allocates nothing.
func TestPublishAllocations(t *testing.T) {
	const runs = 100
	type req struct {
		p    Placeholders
		repl *caddy.Replacer
	}
	reqs := make([]req, runs+1) // AllocsPerRun runs once more to warm up
	for i := range reqs {
		r, repl := newServerRequest()
		reqs[i] = req{PlaceholdersOf(r, repl), repl}
	}
	gray := &grayValues{"v2"}
	i := 0
	if n := testing.AllocsPerRun(runs, func() {
		Publish(reqs[i].p, RateLimit, rateValues{"a", "5"}, rateNames)
		i++
	}); n != 1 {
		t.Fatalf("first handler: %v allocs per request, want 1", n)
	}
	i = 0
	if n := testing.AllocsPerRun(runs, func() {
		EmptyPlaceholders(reqs[i].p)
		Publish(reqs[i].p, GrayRoute, gray, grayNames)
		i++
	}); n != 0 {
		t.Fatalf("later handlers: %v allocs per request, want 0", n)
	}
	if got, want := reqs[runs].repl.ReplaceKnown(shown, ""), "[a][5][v2][]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
