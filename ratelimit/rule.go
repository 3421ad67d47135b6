package ratelimit

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/overload"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

func init() { handlerkit.RegisterRules(rulestore.RateLimit, fields, ParseRule) }

// Defaults.
const (
	DefaultMaxKeys = 100_000
	DefaultStatus  = http.StatusTooManyRequests
	DefaultKey     = "ip"
)

// Ranges of the numeric fields (docs/ratelimit.md, "Rule fields"). With them
// no computed value overflows: a quota is at most 1e12 (token bucket) or
// qps × window ≤ 3.2e16, a refill time at most a year.
const (
	MinQPS        = 1e-6 // one request per 11.6 days
	MaxQPS        = 1e9
	MaxBurst      = 1e12 // also requested_tokens, max_concurrent_total
	MaxConcurrent = 1_000_000_000
	MaxMaxKeys    = 1_000_000_000
)

// Rule is a validated rate_limit rule. Its fields have the same names in the
// Caddyfile, in JSON and in the Redis hash rate_limit:rule:<id>.
type Rule struct {
	// Rule holds the id, what the engines decide by (engine.Spec: the
	// type, quotas, overrides, cost, in-flight caps, max_keys, flow
	// shaping and calendar period) and scope cluster's on_redis_error,
	// redis_timeout and lease_size: what the cluster engine reads.
	cluster.Rule
	Key handlerkit.Key
	// costExpr reads the cost (Spec.Cost) from each request instead, up to
	// MaxCost.
	costExpr  costExpr
	MaxCost   int64
	costField string // the field that set the cost, for errors
	// CountStatus: only responses with these statuses spend the cost,
	// charged when the response is done (Spec.Settles).
	CountStatus handlerkit.StatusSet
	// countsAll: no count_status, every status spends.
	countsAll bool
	// respCost is the response header (or trailer) holding the cost, for
	// response_cost: canonical name, "" without one; respTrailer is the
	// key net/http files its trailer under (http.TrailerPrefix + name).
	respCost, respTrailer string
	// EmptyKeyStatus is the status for requests whose key is empty; 0 means
	// EmptyKey (a fallback key) is used instead.
	EmptyKeyStatus int
	EmptyKey       handlerkit.Key
	emptyLiteral   string // a named fallback key, "empty:<name>"

	Shadow            bool
	RawKeys           bool // show raw keys in logs, /sluice/state and events
	Record            bool // keep the record of recent traffic for previews (record.go)
	Status            int
	ConcurrencyStatus int
	Headers           bool
	Body              string // "" means the default JSON body
	HandleErrors      bool
	Scope             string // "local" or "cluster"

	// RedisErrorStatus is the status for on_redis_error deny.
	RedisErrorStatus int

	// priority is a request's class under the adaptive limit, or
	// priorityExpr the placeholder that gives it per request.
	priority     overload.Class
	priorityExpr string

	// Nest: the rule's parent in a nested quota, and what a refusal does
	// (over_limit); nested_rule.go.
	Nest Nesting

	idAny any // ID boxed once for the placeholder
}

// RedisErrorMode is what a cluster rule does while Redis is unreachable
// (ratelimit/cluster holds it).
type RedisErrorMode = cluster.RedisErrorMode

const (
	FailLocal = cluster.FailLocal
	FailAllow = cluster.FailAllow
	FailDeny  = cluster.FailDeny
)

// Cluster scope defaults.
const (
	DefaultRedisTimeout     = 500 * time.Millisecond
	DefaultRedisErrorStatus = http.StatusServiceUnavailable
)

// ParseRule validates a rate_limit rule's fields. Errors are
// *rulestore.FieldError naming the field.
func ParseRule(id string, f rulestore.Fields) (*Rule, error) {
	r := &Rule{Rule: cluster.Rule{ID: id, Spec: engine.Spec{Cost: 1, MaxKeys: DefaultMaxKeys}, RedisTimeout: DefaultRedisTimeout},
		costField: "requested_tokens", Status: DefaultStatus, ConcurrencyStatus: DefaultStatus, Headers: true, Record: true,
		EmptyKeyStatus: http.StatusForbidden, Scope: "local", RedisErrorStatus: DefaultRedisErrorStatus}
	for _, name := range f.Names() {
		// id names an inline rule (the handler takes it out); a hash in
		// the store may hold it too, and it has always been ignored here.
		if fields.Lookup(name) == nil && name != handlerkit.InlineIDField {
			return nil, f.Errorf(name, "unknown field (want one of %s)", strings.Join(knownFields, ", "))
		}
	}
	p := &ruleParse{FieldReader: handlerkit.FieldReader{Fields: f}, r: r}
	if err := p.read("limit_type"); err != nil {
		return nil, err
	}
	if calendar, err := r.parseCalendar(f, p.Get); err != nil {
		return nil, err
	} else if !calendar {
		_, ok := p.Get("qps")
		switch {
		case ok:
			if err := p.read("qps"); err != nil {
				return nil, err
			}
		case inFlightCapped(p.Get):
			if err := r.parseInFlightOnly(f, p.Get); err != nil {
				return nil, err
			}
		default:
			return nil, f.Errorf("qps", "required: requests per second (or quota and period for a calendar quota; or max_concurrent or max_concurrent_total alone for an in-flight cap without a rate)")
		}
	}
	if err := p.read("burst", "window_size", "requested_tokens"); err != nil {
		return nil, err
	}
	if err := r.parseCost(f, p.Get); err != nil {
		return nil, err
	}
	if field, err := r.finish(&r.Limits); err != nil {
		return nil, f.Errorf(field, "%v", err)
	}
	if err := p.readOr("key_resolver", DefaultKey); err != nil {
		return nil, err
	}
	// The cluster fields come after scope; lease_size after the quota
	// (finish), overrides after limit_type and window_size.
	if err := p.read("max_concurrent", "max_concurrent_total", "on_empty_key",
		"shadow", "headers", "handle_errors", "raw_keys", "record", "max_keys", "status", "concurrency_status", "body",
		"scope", "on_redis_error", "redis_timeout", "lease_size", "overrides"); err != nil {
		return nil, err
	}
	r.idAny = r.ID
	r.Idle = r.Limits.Idle(r.Type)
	for _, l := range r.Overrides {
		r.Idle = max(r.Idle, l.Idle(r.Type))
	}
	if r.Calendar != nil {
		r.Idle = int64(r.Calendar.Period.Longest()) // a key unseen for a whole window counts afresh
	}
	if err := r.parseFlow(p); err != nil {
		return nil, err
	}
	if err := r.finishCost(f); err != nil {
		return nil, err
	}
	if err := r.parseNest(p); err != nil {
		return nil, err
	}
	return r, nil
}

// finish fills defaults of l and checks it against the request cost; an
// error comes with the field to blame.
func (r *Rule) finish(l *Limits) (string, error) {
	switch r.Type {
	case TokenBucket:
		if l.Burst == 0 {
			l.Burst = math.Ceil(l.QPS)
		}
		if refill := l.Burst / l.QPS; refill > syntax.MaxRuleDuration.Seconds() {
			return "burst", fmt.Errorf("a full bucket would take %.0fs to refill (burst ÷ qps); at most a year", refill)
		}
		if float64(r.Cost) > l.Burst {
			return r.costField, fmt.Errorf("%d exceeds burst %g: no request could ever pass", r.Cost, l.Burst)
		}
		l.Quota = int64(l.Burst)
		l.WindowSecs = int64(math.Ceil(l.Burst / l.QPS))
	case SlidingWindow:
		if l.Window == 0 {
			l.Window = int64(time.Second)
		}
		l.Max = math.Floor(l.QPS*float64(l.Window)/1e9 + 1e-9)
		if l.Max < 1 {
			return "qps", fmt.Errorf("qps × window_size = %g allows no request; raise qps or window_size", l.QPS*float64(l.Window)/1e9)
		}
		if float64(r.Cost) > l.Max {
			return r.costField, fmt.Errorf("%d exceeds qps × window_size = %g: no request could ever pass", r.Cost, l.Max)
		}
		l.Quota = int64(l.Max)
		l.WindowSecs = int64(math.Ceil(float64(l.Window) / 1e9))
	case Calendar:
		if float64(r.Cost) > l.Max {
			return r.costField, fmt.Errorf("%d exceeds quota %g: no request could ever pass", r.Cost, l.Max)
		}
		l.Quota = int64(l.Max)
		l.WindowSecs = int64(r.Calendar.Period.Longest() / time.Second) // RateLimit-Policy: the current window's, per request
	}
	l.Advertise(r.ID)
	l.BoxScriptArgs(r.Type)
	return "", nil
}

// Cluster reports whether the rule keeps its counters in Redis.
func (r *Rule) Cluster() bool { return r.Scope == "cluster" }

// parseEmptyKey reads `deny [status]` or a fallback key: a preset or
// placeholder expression, or a plain name for one shared named key.
func (r *Rule) parseEmptyKey(v string) error {
	words := strings.Fields(v)
	if len(words) > 0 && strings.EqualFold(words[0], "deny") {
		r.EmptyKeyStatus = http.StatusForbidden
		if len(words) > 2 {
			return fmt.Errorf("want deny [status]")
		}
		if len(words) == 2 {
			s, err := strconv.Atoi(words[1])
			if err != nil || s < 400 || s > 599 {
				return fmt.Errorf("deny status: want an HTTP status 400-599")
			}
			r.EmptyKeyStatus = s
		}
		return nil
	}
	r.EmptyKeyStatus = 0
	if len(words) == 1 && !strings.Contains(v, "{") {
		if _, err := handlerkit.ParseKey(v); err != nil {
			if rulestore.ValidID(v) != nil {
				return fmt.Errorf("want deny [status], a key preset, a placeholder expression or a plain name")
			}
			r.emptyLiteral = "empty:" + v
			return nil
		}
	}
	k, err := handlerkit.ParseKey(v)
	if err != nil {
		return err
	}
	r.EmptyKey = k
	return nil
}

// parseOverrides reads "key=qps[/burst]" items separated by commas or
// spaces; the key is the resolved key with its prefix, e.g. user:42.
func (r *Rule) parseOverrides(v string) error {
	items := strings.FieldsFunc(v, func(c rune) bool { return c == ',' || c == ' ' || c == '\t' || c == '\n' })
	if len(items) == 0 {
		return fmt.Errorf("empty (want key=qps[/burst], ...)")
	}
	r.Overrides = make(map[string]*Limits, len(items))
	for _, it := range items {
		i := strings.LastIndexByte(it, '=')
		if i <= 0 {
			return fmt.Errorf("%q: want key=qps[/burst]", it)
		}
		key, nums := it[:i], it[i+1:]
		if _, dup := r.Overrides[key]; dup {
			return fmt.Errorf("key %q given twice", key)
		}
		l := &Limits{Window: r.Limits.Window}
		if r.Type == Calendar {
			q, ok := syntax.ParseWhole(nums, 1, MaxBurst)
			if !ok {
				return fmt.Errorf("%q: want key=quota, a whole number %s", it, syntax.Range(1, int64(MaxBurst)))
			}
			l.Max = float64(q)
			if field, err := r.finish(l); err != nil {
				return fmt.Errorf("%q: %s: %v", it, field, err)
			}
			r.Overrides[key] = l
			continue
		}
		qs, bs, hasBurst := strings.Cut(nums, "/")
		q, ok := syntax.ParseNumber(qs, MinQPS, MaxQPS)
		if !ok {
			return fmt.Errorf("%q: qps: want a number > 0, %s", it, syntax.Range(MinQPS, MaxQPS))
		}
		l.QPS = q
		if hasBurst {
			if r.Type != TokenBucket {
				return fmt.Errorf("%q: a burst applies to token_bucket only", it)
			}
			b, ok := syntax.ParseWhole(bs, 1, MaxBurst)
			if !ok {
				return fmt.Errorf("%q: burst: want a whole number %s", it, syntax.Range(1, int64(MaxBurst)))
			}
			l.Burst = float64(b)
		}
		if field, err := r.finish(l); err != nil {
			return fmt.Errorf("%q: %s: %v", it, field, err)
		}
		r.Overrides[key] = l
	}
	return nil
}

// InlineID names an inline rule by a hash of its fields (handlerkit.InlineID).
func InlineID(f rulestore.Fields) string { return handlerkit.InlineID(f) }

func parseSeconds(v string) (int64, error) {
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s*1e9 >= 1) || s > 366*24*3600 {
			return 0, fmt.Errorf("want seconds > 0")
		}
		return int64(s * 1e9), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > syntax.MaxRuleDuration {
		return 0, fmt.Errorf("want seconds (e.g. 10) or a duration (e.g. 1m), at most 366 days")
	}
	return int64(d), nil
}
