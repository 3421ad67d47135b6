package ratelimit

// Which key GET /sluice/quota answers for. An operator names a key either
// as stored (/sluice/quota/{rule}/{key}) or by the request values a
// request carries (/sluice/quota/{rule}?header.X-User-Id=alice), which
// the rule's key_resolver turns into the stored key as it does for a
// request. A stored key given without the prefix the resolver adds
// (user:alice for key0:user:alice) is found under it. The answer says
// which key it looked up and how, and whether that key was ever seen.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

// QuotaAnswer is GET /sluice/quota/{rule}/{key}: the key's usage, and how
// the key was found.
type QuotaAnswer struct {
	*QuotaUsage
	// Given is the key as asked for, or the request values as
	// name=value pairs.
	Given string `json:"given"`
	// LookedUp says how Key was found: "stored key" (as given),
	// "stored key, with the resolver's prefix" (the given key under a
	// prefix the rule's key_resolver adds), or "resolved from request
	// values" (as the rule's key_resolver resolves a request carrying
	// them).
	LookedUp string `json:"looked_up"`
	// KeyResolver is the rule's key_resolver spec.
	KeyResolver string `json:"key_resolver"`
	// Note says what to do when the key was never seen.
	Note string `json:"note,omitempty"`
}

// quotaQuery is the parsed path and query of a quota request.
type quotaQuery struct {
	id, key string
	values  handlerkit.RequestValues
	given   []string
}

// parseQuotaPath splits rest ("{rule}/{key}" or "{rule}?header.X=v&...",
// as escaped by the client) into the rule id and the key or request
// values.
func parseQuotaPath(rest string) (quotaQuery, error) {
	var q quotaQuery
	path, rawQuery, _ := strings.Cut(rest, "?")
	idEsc, keyEsc, _ := strings.Cut(path, "/")
	id, err1 := url.PathUnescape(idEsc)
	key, err2 := url.PathUnescape(keyEsc)
	vals, err3 := url.ParseQuery(rawQuery)
	usage := quotaError(http.StatusBadRequest, "want /sluice/quota/{rule}/{key} (the key as stored, e.g. user:alice; escape a / in it as %%2F) "+
		"or /sluice/quota/{rule}?header.X-User-Id=alice (request values: header.<name>, query.<name>, cookie.<name>, ip, path, host, method)")
	if errors.Join(err1, err2, err3) != nil || id == "" {
		return q, usage
	}
	q.id, q.key = id, key
	for name, vs := range vals {
		for _, v := range vs {
			if err := q.addValue(name, v); err != nil {
				return q, quotaError(http.StatusBadRequest, "%v", err)
			}
		}
	}
	switch {
	case q.key == "" && q.values.Empty():
		return q, usage
	case q.key != "" && !q.values.Empty():
		return q, quotaError(http.StatusBadRequest, "give the key or request values, not both")
	}
	return q, nil
}

func (q *quotaQuery) addValue(name, v string) error {
	rv := &q.values
	kind, field, _ := strings.Cut(name, ".")
	switch {
	case kind == "header" && field != "":
		if rv.Headers == nil {
			rv.Headers = http.Header{}
		}
		rv.Headers.Add(field, v)
	case kind == "query" && field != "":
		if rv.Query == nil {
			rv.Query = url.Values{}
		}
		rv.Query.Add(field, v)
	case kind == "cookie" && field != "":
		if rv.Cookies == nil {
			rv.Cookies = map[string]string{}
		}
		rv.Cookies[field] = v
	case name == "ip":
		rv.IP = v
	case name == "path":
		rv.Path = v
	case name == "host":
		rv.Host = v
	case name == "method":
		rv.Method = v
	default:
		return fmt.Errorf("unknown request value %q: want header.<name>, query.<name>, cookie.<name>, ip, path, host or method", clipName(name))
	}
	q.given = append(q.given, name+"="+v)
	return nil
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// quotaFor answers for the key q names under rule: resolved from request
// values, or as given, else under one of the resolver's prefixes if the
// key as given was never seen but is held there.
func quotaFor(ctx context.Context, app *rulestore.App, rule *Rule, lim *limiter, q quotaQuery) (*QuotaAnswer, error) {
	ans := &QuotaAnswer{KeyResolver: rule.Key.String(), LookedUp: "stored key", Given: q.key}
	look := func(key string) (*QuotaUsage, error) {
		key = handlerkit.FitKey(key)
		if rule.Cluster() {
			return quotaFromRedis(ctx, app, rule, key)
		}
		return quotaFromMemory(rule, lim, key), nil
	}
	if q.key == "" {
		ans.Given, ans.LookedUp = strings.Join(q.given, " "), "resolved from request values"
		key, ok := rule.Key.Resolve(q.values)
		if !ok {
			return nil, quotaError(http.StatusBadRequest, "rule %q keys requests by %q: a request with %s resolves to no key (every alternative is empty)",
				rule.ID, rule.Key.String(), ans.Given)
		}
		u, err := look(key)
		if err != nil {
			return nil, err
		}
		ans.QuotaUsage = u
		ans.noteUnseen()
		return ans, nil
	}
	u, err := look(q.key)
	if err != nil {
		return nil, err
	}
	ans.QuotaUsage = u
	if !u.seen() {
		for _, p := range rule.Key.Prefixes() {
			if strings.HasPrefix(q.key, p) {
				continue
			}
			alt, err := look(p + q.key)
			if err == nil && alt.seen() {
				ans.QuotaUsage, ans.LookedUp = alt, "stored key, with the resolver's prefix"
				return ans, nil
			}
		}
	}
	ans.noteUnseen()
	return ans, nil
}

// noteUnseen says how to name the key when it was never seen.
func (a *QuotaAnswer) noteUnseen() {
	if a.seen() {
		return
	}
	a.Note = fmt.Sprintf("never seen: no state for key %q (never limited here, or idle long enough to be forgotten); "+
		"the rule keys requests by %q, so name a user by request values, e.g. ?header.X-User-Id=alice "+
		"(caddy sluice quota %s --header X-User-Id=alice)", a.Key, a.KeyResolver, a.Rule)
}

// seen: state exists for the key, in the table or as an eviction's trace.
func (u *QuotaUsage) seen() bool { return u.Tracked || u.Evicted }
