package handlerkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// MaxKeyLength caps a key's length; longer keys are replaced by a hash, so
// a client can never make the gateway store a huge key.
const MaxKeyLength = 256

// Key is a request key: an ordered list of alternatives, the first one that
// resolves non-empty wins. Each alternative's value is prefixed with its name
// ("user:", "ip:", ...) so values from different sources never collide.
type Key struct {
	alts []keyAlt
	spec string
}

type keyAlt struct {
	prefix string
	parts  []keyPart
}

// keyPart is a literal or a placeholder; common placeholders are read from
// the request directly, without the replacer, to avoid allocations.
type keyPart struct {
	literal     string
	placeholder string
	header      string // canonical header name for {http.request.header.*}
	kind        partKind
}

type partKind uint8

const (
	partLiteral partKind = iota
	partHeader
	partClientIP
	partPath
	partHost
	partMethod
	partOther
)

// Presets are the named keys of the seed design.
var presets = map[string][]string{
	"userid": {"user:{http.request.header.X-User-Id}", "ip:{client_ip}"},
	"ip":     {"ip:{client_ip}"},
	"tenant": {"tenant:{http.request.header.X-Tenant-Id}:{http.request.uri.path}"},
	"global": {"global"},
}

// ParseKey parses a key spec: space-separated alternatives, each a preset
// (userId, ip, tenant, global) or a placeholder expression such as
// {http.request.header.X-Api-Key} or {http.request.header.X-Tenant-Id}:{http.request.uri.path}.
func ParseKey(spec string) (Key, error) {
	k := Key{spec: spec}
	words := strings.Fields(spec)
	if len(words) == 0 {
		return k, fmt.Errorf("empty key")
	}
	for i, w := range words {
		if p, ok := presets[strings.ToLower(w)]; ok {
			for _, s := range p {
				k.alts = append(k.alts, mustAlt(s))
			}
			continue
		}
		if !strings.Contains(w, "{") {
			return k, fmt.Errorf("%q is neither a preset (userId, ip, tenant, global) nor a placeholder expression", w)
		}
		alt, err := parseAlt(fmt.Sprintf("key%d:", i) + w)
		if err != nil {
			return k, err
		}
		k.alts = append(k.alts, alt)
	}
	return k, nil
}

func mustAlt(s string) keyAlt {
	a, err := parseAlt(s)
	if err != nil {
		panic(err)
	}
	return a
}

// parseAlt splits "prefix:rest" where rest mixes literals and {placeholders}.
func parseAlt(s string) (keyAlt, error) {
	var a keyAlt
	if i := strings.IndexByte(s, ':'); i >= 0 && !strings.Contains(s[:i], "{") {
		a.prefix, s = s[:i+1], s[i+1:]
	}
	for len(s) > 0 {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			a.parts = append(a.parts, keyPart{literal: s})
			break
		}
		if open > 0 {
			a.parts = append(a.parts, keyPart{literal: s[:open]})
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			return a, fmt.Errorf("unclosed placeholder in %q", s)
		}
		name := s[open+1 : open+end]
		if name == "" || strings.ContainsAny(name, "{ ") {
			return a, fmt.Errorf("bad placeholder {%s}", name)
		}
		a.parts = append(a.parts, classify(name))
		s = s[open+end+1:]
	}
	if len(a.parts) == 0 && a.prefix == "" {
		return a, fmt.Errorf("empty key alternative")
	}
	return a, nil
}

func classify(name string) keyPart {
	p := keyPart{placeholder: name, kind: partOther}
	switch {
	case strings.HasPrefix(name, "http.request.header."):
		p.kind = partHeader
		p.header = textproto.CanonicalMIMEHeaderKey(strings.TrimPrefix(name, "http.request.header."))
	case name == "client_ip" || name == "http.vars.client_ip":
		p.kind = partClientIP
	case name == "http.request.uri.path" || name == "path":
		p.kind = partPath
	case name == "http.request.host" || name == "host":
		p.kind = partHost
	case name == "http.request.method" || name == "method":
		p.kind = partMethod
	}
	return p
}

// String returns the spec the key was parsed from.
func (k Key) String() string { return k.spec }

// IsZero reports whether the key was never parsed.
func (k Key) IsZero() bool { return len(k.alts) == 0 }

// Append resolves the key for r and appends it to buf. ok is false when
// every alternative was empty: an alternative is empty if any placeholder in
// it is empty (so "tenant:{X-Tenant-Id}:{path}" without the header is empty).
func (k Key) Append(buf []byte, r *http.Request) (out []byte, ok bool) {
	for _, a := range k.alts {
		start := len(buf)
		buf = append(buf, a.prefix...)
		ok = true
		for i := range a.parts {
			p := &a.parts[i]
			v := p.value(r)
			if p.kind != partLiteral && v == "" {
				ok = false
				break
			}
			buf = append(buf, v...)
		}
		if ok {
			if len(buf)-start > MaxKeyLength {
				sum := sha256.Sum256(buf[start:])
				buf = append(buf[:start], "sha256:"...)
				buf = hex.AppendEncode(buf, sum[:16])
			}
			return buf, true
		}
		buf = buf[:start]
	}
	return buf, false
}

// FitKey is key as Append stores it: unchanged up to MaxKeyLength bytes,
// else "sha256:" and the first 32 hex digits of its SHA-256. It lets an
// operator name a long key by its full text.
func FitKey(key string) string {
	if len(key) <= MaxKeyLength {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

func (p *keyPart) value(r *http.Request) string {
	switch p.kind {
	case partLiteral:
		return p.literal
	case partHeader:
		if v := r.Header[p.header]; len(v) > 0 {
			return v[0]
		}
		return ""
	case partClientIP:
		if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
			return ip
		}
		return ""
	case partPath:
		return r.URL.Path
	case partHost:
		return r.Host
	case partMethod:
		return r.Method
	}
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	v, _ := repl.GetString(p.placeholder)
	return v
}
