package grayroute

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Source is where a rule looks for its tag.
type Source uint8

const (
	// SourceAny looks in the header, then the query, then the cookies, and
	// uses the first non-empty value found.
	SourceAny Source = iota
	SourceHeader
	SourceQuery
	SourceCookie
)

// ParseSource parses header|query|cookie|any.
func ParseSource(s string) (Source, error) {
	switch s {
	case "any", "":
		return SourceAny, nil
	case "header":
		return SourceHeader, nil
	case "query":
		return SourceQuery, nil
	case "cookie":
		return SourceCookie, nil
	}
	return 0, fmt.Errorf("want header, query, cookie or any")
}

// request is a request as the matchers read it: the Cookie header is looked
// up once, when a rule first needs it, however many rules are tried. A
// request with few headers has them listed once, and their names read into
// a 64-bit presence mask (headerBit), so a rule whose tag header the
// request lacks, the usual case, is turned away by one bit test, and one
// whose bit is set compares a few names instead of hashing its tag for a
// map lookup. A request with many headers is looked up in its map until
// maskAfter rules have asked; only then are its names read into the mask
// (reading them costs a few map lookups: worth it for many rules, not for
// one or two).
type request struct {
	*http.Request
	cookies     []string
	cookiesRead bool
	headersRead bool
	few         int    // headers listed in names and values; -1: too many, use the map
	mask        uint64 // headerBit of every header name, once masked
	masked      bool
	lookups     int  // map lookups before masked, with many headers
	headersOnly bool // no query string and no Cookie header: a tag can only be a header
	names       [fewHeaders]string
	values      [fewHeaders][]string
}

// headerBit maps a header name to one of 64 bits, from its length and two
// of its bytes: cheap, and different for most names a request carries.
// Names that share a bit are told apart by the lookup that follows.
func headerBit(name string) uint64 {
	n := len(name)
	if n == 0 {
		return 1
	}
	return 1 << ((uint(n)*7 + uint(name[n-1])*3 + uint(name[n/2])) & 63)
}

// maskAfter is how many map lookups a request with many headers takes
// before its names are read into the mask.
const maskAfter = 4

// readHeaders lists a request's few headers and fills the mask.
func (q *request) readHeaders() {
	if len(q.Header) > fewHeaders {
		q.lookupHeaders()
		return
	}
	q.headersRead, q.cookiesRead = true, true
	// The Cookie header is found while listing, not looked up.
	for k, v := range q.Header {
		bit := headerBit(k)
		if bit == cookieBit && k == "Cookie" {
			q.cookies = v
		}
		q.mask |= bit
		q.names[q.few], q.values[q.few] = k, v
		q.few++
	}
	q.masked = true
	q.headersOnly = q.URL.RawQuery == "" && len(q.cookies) == 0
}

// lookupHeaders leaves the headers to map lookups, as for a request with
// many: cheaper than listing them when a handler has at most maskAfter
// rules with a tag (listing a map costs about three lookups).
func (q *request) lookupHeaders() {
	q.headersRead, q.few = true, -1
}

// cookieBit is headerBit("Cookie").
const cookieBit = 1 << ((6*7 + 'e'*3 + 'k') & 63)

// mayHave reports whether the request may carry a header of this bit
// (false: it certainly does not).
func (q *request) mayHave(bit uint64) bool {
	if !q.headersRead {
		q.readHeaders()
	}
	if !q.masked {
		if q.lookups++; q.lookups <= maskAfter {
			return true
		}
		for k := range q.Header {
			q.mask |= headerBit(k)
		}
		q.masked = true
		q.headersOnly = q.URL.RawQuery == "" && len(q.cookieLines()) == 0
	}
	return q.mask&bit != 0
}

const fewHeaders = 8

// header returns the values of a header by its canonical name.
func (q *request) header(name string) []string {
	if !q.headersRead {
		q.readHeaders()
	}
	if q.few < 0 {
		return q.Header[name]
	}
	for i := range q.few {
		if q.names[i] == name {
			return q.values[i]
		}
	}
	return nil
}

func (q *request) cookieLines() []string {
	if !q.cookiesRead { // readHeaders reads them too
		q.cookies, q.cookiesRead = q.Header["Cookie"], true
	}
	return q.cookies
}

// TagValue finds the tag's value in the request without allocating in the
// common case. header must be the canonical form of the tag
// (textproto.CanonicalMIMEHeaderKey); query and cookie names are exact.
func TagValue(r *http.Request, src Source, tag, header string) (string, bool) {
	return tagValue(&request{Request: r}, src, tag, header, headerBit(header))
}

// tagValue is TagValue; bit is headerBit(header).
func tagValue(q *request, src Source, tag, header string, bit uint64) (string, bool) {
	if (src == SourceAny || src == SourceHeader) && q.mayHave(bit) {
		if v := q.header(header); len(v) > 0 && v[0] != "" {
			return v[0], true
		}
	}
	if (src == SourceAny || src == SourceQuery) && q.URL.RawQuery != "" {
		if v, ok := queryValue(q.URL.RawQuery, tag); ok && v != "" {
			return v, true
		}
	}
	if src == SourceAny || src == SourceCookie {
		for _, line := range q.cookieLines() {
			if v, ok := cookieValue(line, tag); ok && v != "" {
				return v, true
			}
		}
	}
	return "", false
}

// queryValue returns the first value of name in a raw query, unescaping only
// when the pair is escaped (which allocates).
func queryValue(raw, name string) (string, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", false
			}
			v = u
		}
		return v, true
	}
	return "", false
}

// cookieValue returns the value of the cookie name in one Cookie header line.
func cookieValue(line, name string) (string, bool) {
	for line != "" {
		var part string
		part, line, _ = strings.Cut(line, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		if k != name {
			continue
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v, true
	}
	return "", false
}

type matchKind uint8

const (
	matchPresent matchKind = iota // any non-empty value
	matchExact
	matchList
	matchPrefix
	matchRegex
)

// ValueMatcher is a compiled match_value:
//
//	(absent) or *      any non-empty value
//	beta               exactly "beta"
//	a,b,c              one of the list
//	prefix:beta-       starts with "beta-"
//	regex:^beta-\d+$   matches the regular expression (RE2)
//	exact:a,b          exactly "a,b" (escape hatch for values with commas or a prefix word)
//
// Matching is case-sensitive.
type ValueMatcher struct {
	kind   matchKind
	values []string
	re     *regexp.Regexp
}

// ParseValueMatcher compiles a match_value.
func ParseValueMatcher(s string) (ValueMatcher, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "*":
		return ValueMatcher{kind: matchPresent}, nil
	case strings.HasPrefix(s, "exact:"):
		return ValueMatcher{kind: matchExact, values: []string{strings.TrimPrefix(s, "exact:")}}, nil
	case strings.HasPrefix(s, "prefix:"):
		p := strings.TrimPrefix(s, "prefix:")
		if p == "" {
			return ValueMatcher{}, fmt.Errorf("empty prefix")
		}
		return ValueMatcher{kind: matchPrefix, values: []string{p}}, nil
	case strings.HasPrefix(s, "regex:"):
		re, err := regexp.Compile(strings.TrimPrefix(s, "regex:"))
		if err != nil {
			return ValueMatcher{}, fmt.Errorf("bad regular expression: %v", err)
		}
		return ValueMatcher{kind: matchRegex, re: re}, nil
	case strings.Contains(s, ","):
		var vals []string
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			return ValueMatcher{}, fmt.Errorf("empty list")
		}
		return ValueMatcher{kind: matchList, values: vals}, nil
	}
	return ValueMatcher{kind: matchExact, values: []string{s}}, nil
}

// Match reports whether a (non-empty) tag value matches.
func (m *ValueMatcher) Match(v string) bool {
	switch m.kind {
	case matchPresent:
		return true
	case matchExact:
		return v == m.values[0]
	case matchList:
		for _, x := range m.values {
			if v == x {
				return true
			}
		}
		return false
	case matchPrefix:
		return strings.HasPrefix(v, m.values[0])
	case matchRegex:
		return m.re.MatchString(v)
	}
	return false
}
