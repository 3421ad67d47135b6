package handlerkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// request builds a request as Caddy hands it to a handler: with a replacer
// and the client IP variable that Caddy derives from trusted_proxies.
func request(clientIP string, headers ...string) *http.Request {
	r := httptest.NewRequest("GET", "http://example.com/orders/1?x=y", nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Set(k, v)
	}
	repl := caddy.NewReplacer()
	ctx := context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: clientIP})
	r = r.WithContext(ctx)
	caddyhttp.NewTestReplacer(r)
	return r
}

func resolve(t *testing.T, spec string, r *http.Request) (string, bool) {
	t.Helper()
	k, err := ParseKey(spec)
	if err != nil {
		t.Fatalf("ParseKey(%q): %v", spec, err)
	}
	b, ok := k.Append(nil, r)
	return string(b), ok
}

func TestPresets(t *testing.T) {
	cases := []struct {
		spec   string
		r      *http.Request
		want   string
		wantOK bool
	}{
		{"userId", request("1.2.3.4", "X-User-Id: 42"), "user:42", true},
		{"userId", request("1.2.3.4"), "ip:1.2.3.4", true},
		{"ip", request("1.2.3.4", "X-User-Id: 42"), "ip:1.2.3.4", true},
		{"tenant", request("1.2.3.4", "X-Tenant-Id: acme"), "tenant:acme:/orders/1", true},
		{"tenant", request("1.2.3.4"), "", false},
		{"global", request("1.2.3.4"), "global", true},
		{"{http.request.header.X-Api-Key}", request("1.2.3.4", "X-Api-Key: k1"), "key0:k1", true},
		{"{http.request.header.X-Api-Key}", request("1.2.3.4"), "", false},
		{"{http.request.header.X-Api-Key} ip", request("1.2.3.4"), "ip:1.2.3.4", true},
		{"{http.request.header.X-Tenant-Id}:{http.request.method}", request("", "X-Tenant-Id: t"), "key0:t:GET", true},
		{"{http.request.uri.query.x}", request(""), "key0:y", true},
	}
	for _, c := range cases {
		got, ok := resolve(t, c.spec, c.r)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: got %q,%v want %q,%v", c.spec, got, ok, c.want, c.wantOK)
		}
	}
}

func TestSourcesNeverCollide(t *testing.T) {
	// A user id that looks like an IP must not share the IP's bucket.
	user, _ := resolve(t, "userId", request("9.9.9.9", "X-User-Id: 1.2.3.4"))
	ip, _ := resolve(t, "userId", request("1.2.3.4"))
	if user == ip {
		t.Fatalf("user key %q equals ip key %q", user, ip)
	}
}

func TestLongKeysAreHashed(t *testing.T) {
	long := strings.Repeat("a", 10_000)
	got, ok := resolve(t, "userId", request("", "X-User-Id: "+long))
	if !ok || len(got) > MaxKeyLength || !strings.HasPrefix(got, "sha256:") {
		t.Fatalf("long key stored as %d bytes: %.40q", len(got), got)
	}
	other, _ := resolve(t, "userId", request("", "X-User-Id: "+long+"b"))
	if other == got {
		t.Fatal("two different long keys hash the same")
	}
	// FitKey names the stored key from the full text, as an operator
	// asking for its quota gives it.
	if fit := FitKey("user:" + long); fit != got {
		t.Fatalf("FitKey of the long key = %q, the request stored %q", fit, got)
	}
	if fit := FitKey("user:alice"); fit != "user:alice" {
		t.Fatalf("FitKey changed a short key: %q", fit)
	}
}

func TestParseKeyErrors(t *testing.T) {
	for _, bad := range []string{"", "user", "{unclosed", "{}", "x{a b}"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	k, _ := ParseKey("userId")
	r := request("1.2.3.4", "X-User-Id: 42")
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf, _ = k.Append(buf[:0], r) }); n != 0 {
		t.Fatalf("Append allocates %v times", n)
	}
}

func BenchmarkKeyAppend(b *testing.B) {
	for _, spec := range []string{"userId", "ip", "tenant", "{http.request.header.X-Api-Key} ip"} {
		k, _ := ParseKey(spec)
		r := request("1.2.3.4", "X-User-Id: 42", "X-Tenant-Id: acme", "X-Api-Key: abc")
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			for i := 0; i < b.N; i++ {
				buf, _ = k.Append(buf[:0], r)
			}
		})
	}
}
