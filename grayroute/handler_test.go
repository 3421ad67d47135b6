package grayroute

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/rulestore"
)

// newHandler builds a handler on an empty store with inline rules.
func newHandler(t testing.TB, rules ...RuleRef) *Handler {
	t.Helper()
	h := &Handler{Rules: rules}
	if err := h.setup(&rulestore.App{}, nil, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFallbackOnOpenAsksTheBreakerForTheTargetVersion(t *testing.T) {
	h := newHandler(t, RuleRef{ID: "canary", Inline: graySpec(rulestore.Fields{
		"target_version": "v2", "fallback_version": "v1", "fallback_on_open": "v2-breaker"})})
	open := false
	var asked [2]string
	h.isOpen = func(rule, key string) bool { asked = [2]string{rule, key}; return open }

	r := httptest.NewRequest("GET", "/", nil)
	if v, _ := h.decide(r); v.version != "v2" {
		t.Fatalf("breaker closed: got %s, want v2", v)
	}
	if asked != [2]string{"v2-breaker", "v2"} {
		t.Errorf("asked IsOpen%v, want (v2-breaker, v2)", asked)
	}
	open = true
	if d, _ := h.decide(r); d.version != "v1" || d.ruleAny != "canary" {
		t.Fatalf("breaker open: got %s by %v, want v1 by canary", d.version, d.ruleAny)
	}
}

func TestFallbackDefaultsToDefaultVersion(t *testing.T) {
	h := newHandler(t, RuleRef{ID: "canary", Inline: graySpec(rulestore.Fields{"target_version": "v2", "weight": "0"})})
	h2 := &Handler{Rules: h.Rules, DefaultVersion: "stable"}
	if err := h2.setup(&rulestore.App{}, nil, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	if v, _ := h.decide(r); v.version != "v1" {
		t.Errorf("got %s, want v1", v)
	}
	if v, _ := h2.decide(r); v.version != "stable" {
		t.Errorf("got %s, want stable", v)
	}
}

func benchmarkDecide(b *testing.B, n int) {
	// Rules the request does not match, then the one that decides; all in
	// the store's static layer, as from the global rulestore block.
	store := &rulestore.App{Gray: map[string]rulestore.Fields{}}
	var refs []RuleRef
	for i := 0; i < n-1; i++ {
		id := fmt.Sprintf("r%d", i)
		store.Gray[id] = rulestore.Fields{"target_version": "v2", "match_tag": fmt.Sprintf("X-Tag-%d", i), "match_value": "yes"}
		refs = append(refs, RuleRef{ID: id})
	}
	store.Gray["last"] = rulestore.Fields{"target_version": "v2", "weight": "20", "match_tag": "X-Beta", "match_value": "on,yes"}
	refs = append(refs, RuleRef{ID: "last"})
	if err := store.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	h := &Handler{Rules: refs}
	if err := h.setup(store, nil, zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Beta", "yes")
	r.Header.Set("X-User-Id", "user-1234567")
	if v, _ := h.decide(r); v.version != "v1" && v.version != "v2" {
		b.Fatalf("decided %q", v.version)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		// CPU time per decision beside wall time: on a shared, busy
		// machine the wall time also counts the time spent descheduled.
		before := cpuTime()
		for b.Loop() {
			h.decide(r)
		}
		b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := r.Clone(r.Context())
			for pb.Next() {
				h.decide(r)
			}
		})
	})
}

// cpuTime is the process's user and system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkDecide1Rule(b *testing.B)   { benchmarkDecide(b, 1) }
func BenchmarkDecide5Rules(b *testing.B)  { benchmarkDecide(b, 5) }
func BenchmarkDecide20Rules(b *testing.B) { benchmarkDecide(b, 20) }

// BenchmarkServeHTTP is one request through the handler with Caddy's vars
// and replacer in the context, as the server sets them up.
func BenchmarkServeHTTP(b *testing.B) {
	h := newHandler(b, RuleRef{ID: "beta", Inline: graySpec(rulestore.Fields{
		"target_version": "v2", "weight": "20", "match_tag": "X-Beta", "match_value": "yes"})})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Beta", "yes")
	r.Header.Set("X-User-Id", "user-1234567")
	repl := caddy.NewReplacer()
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{})
	r = r.WithContext(ctx)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r, next)
	}
}

// The presence mask only ever skips a rule whose tag the request cannot
// carry: with few and with many headers, in a query and in a cookie, for a
// handler with many tagged rules (headers listed) and with few (looked up).
func TestTagMaskNeverHidesATag(t *testing.T) {
	for _, absent := range []int{10, 2} {
		t.Run(fmt.Sprintf("%d rules before", absent), func(t *testing.T) { testTagMask(t, absent) })
	}
}

func testTagMask(t *testing.T, absent int) {
	var refs []RuleRef
	for i := range absent {
		refs = append(refs, RuleRef{ID: fmt.Sprintf("absent%d", i), Inline: graySpec(rulestore.Fields{
			"target_version": "v9", "match_tag": fmt.Sprintf("X-Absent-%d", i), "match_value": "yes"})})
	}
	refs = append(refs, RuleRef{ID: "beta", Inline: graySpec(rulestore.Fields{
		"target_version": "v2", "match_tag": "X-Beta", "match_value": "yes"})})
	h := newHandler(t, refs...)
	for _, c := range []struct {
		name, url string
		headers   int
		cookie    bool
	}{
		{"few headers", "/", 2, false},
		{"many headers", "/", 20, false},
		{"query", "/?X-Beta=yes", 20, false},
		{"cookie", "/", 3, true},
		{"cookie, many headers", "/", 20, true},
	} {
		r := httptest.NewRequest("GET", c.url, nil)
		for i := range c.headers {
			r.Header.Set(fmt.Sprintf("X-Other-%d", i), "x")
		}
		switch {
		case c.cookie:
			r.Header.Set("Cookie", "a=b; X-Beta=yes")
		case c.url == "/":
			r.Header.Set("X-Beta", "yes")
		}
		if d, _ := h.decide(r); d.version != "v2" || d.ruleAny != "beta" {
			t.Errorf("%s: decided %s by %v, want v2 by beta", c.name, d.version, d.ruleAny)
		}
	}
}

// cookieBit is a constant so readHeaders can test it cheaply; it must
// stay the bit of the Cookie header.
func TestCookieBit(t *testing.T) {
	if cookieBit != headerBit("Cookie") {
		t.Fatalf("cookieBit %#x, headerBit(Cookie) %#x", uint64(cookieBit), headerBit("Cookie"))
	}
}

// graySpec is an inline gray rule's spec from its Redis fields.
func graySpec(f rulestore.Fields) *rulestore.GraySpec {
	s, err := rulestore.SpecFromFields(rulestore.Gray, f)
	if err != nil {
		panic(err)
	}
	return s.(*rulestore.GraySpec)
}
