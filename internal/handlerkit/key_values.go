package handlerkit

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sort"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// RequestValues are the parts of a request an operator names to ask what
// key a request carrying them resolves to ("why was this user limited?"),
// without knowing how the key spec spells it.
type RequestValues struct {
	Headers http.Header
	Query   url.Values
	Cookies map[string]string
	// IP is the client IP ({client_ip}); Path, Host and Method default to
	// "/", "" and GET.
	IP, Path, Host, Method string
}

// Empty reports whether no value is given.
func (v RequestValues) Empty() bool {
	return len(v.Headers) == 0 && len(v.Query) == 0 && len(v.Cookies) == 0 &&
		v.IP == "" && v.Path == "" && v.Host == "" && v.Method == ""
}

// Request builds a request that carries v, with Caddy's replacer and
// client IP variable set, as Key.Append reads a served request.
func (v RequestValues) Request() *http.Request {
	u := &url.URL{Path: v.Path, RawQuery: v.Query.Encode()}
	if u.Path == "" {
		u.Path = "/"
	}
	r := &http.Request{Method: v.Method, URL: u, Host: v.Host, Header: http.Header{}, RequestURI: u.RequestURI()}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	for name, vals := range v.Headers {
		r.Header[http.CanonicalHeaderKey(name)] = vals
	}
	names := make([]string, 0, len(v.Cookies))
	for name := range v.Cookies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r.AddCookie(&http.Cookie{Name: name, Value: v.Cookies[name]})
	}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
	r = r.WithContext(ctx)
	if v.IP != "" {
		caddyhttp.SetVar(ctx, caddyhttp.ClientIPVarKey, v.IP)
	}
	repl := caddyhttp.NewTestReplacer(r)
	return r.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, repl))
}

// Resolve is the key a request carrying v resolves to, as Append stores
// it; ok is false when every alternative is empty.
func (k Key) Resolve(v RequestValues) (string, bool) {
	b, ok := k.Append(nil, v.Request())
	return string(b), ok
}

// Prefixes lists the prefixes the key's alternatives put before their
// values ("user:", "ip:", or "key0:" for the first placeholder
// expression), in order.
func (k Key) Prefixes() []string {
	out := make([]string, 0, len(k.alts))
	for _, a := range k.alts {
		if a.prefix != "" && !slices.Contains(out, a.prefix) {
			out = append(out, a.prefix)
		}
	}
	return out
}
