package ratelimit

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/overload"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// field is one rate_limit rule field: its name, its Syntax and Default as
// docs/ratelimit.md's reference table shows them (a test holds the two
// together), and how its value is read into the rule. The fields a step of
// ParseRule reads together (a calendar quota's, a cost's) have no parse of
// their own. ParseRule reads the fields in the order their checks need;
// the checks across fields stay there.
type field = handlerkit.Field[*ruleParse]

// ruleParse is one rule being read: the rule, its fields and the field
// being read, and the adaptive limit while max_concurrent adaptive is read.
type ruleParse struct {
	handlerkit.FieldReader
	r        *Rule
	adaptive *overload.Config
	queues   bool // the rule has a queue: it paces, or max_concurrent adaptive
}

// fields are the rule's fields, in the docs' order.
var fields = handlerkit.NewFieldTable(
	handlerkit.Row("limit_type", "`token_bucket`, `sliding_window`, `calendar`", "`token_bucket`", parseLimitType),
	handlerkit.Row("qps", "number, "+syntax.Span(MinQPS, MaxQPS), "required (not with `quota`, nor on an [in-flight cap alone](#in-flight-caps))", func(p *ruleParse, v string) error {
		var ok bool
		if p.r.Limits.QPS, ok = syntax.ParseNumber(v, MinQPS, MaxQPS); !ok {
			return p.Errorf("want a number > 0, %s", syntax.Range(MinQPS, MaxQPS))
		}
		return nil
	}).In(syntax.NumberBounds(MinQPS, MaxQPS)),
	// quota, period and timezone: read by parseCalendar.
	readTogether("quota", "int, "+syntax.Span(1, int64(MaxBurst)), "none (a rate: `qps`)").
		In(syntax.WholeBounds(1, MaxBurst)).Needing("period", "day", "qps", ""),
	readTogether("period", "`minute`, `hour`, `day`, `week`, `month`", "required with `quota`").Needing("quota", "10", "qps", ""),
	readTogether("timezone", "IANA zone name", "`UTC`").Needing("quota", "10", "period", "day", "qps", ""),
	only(onTokenBucket, wholeRow("burst", "`ceil(qps)` (one second's worth)", 0, MaxBurst, " (0 means one second's worth of qps)", func(p *ruleParse, n int64) {
		p.r.Limits.Burst = float64(n)
	})),
	only(onSlidingWindow, handlerkit.Row("window_size", "seconds or duration, ≤ 366 days", "`1`", func(p *ruleParse, v string) (err error) {
		if p.r.Limits.Window, err = parseSeconds(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}).In(syntax.DurationBounds(0, syntax.MaxRuleDuration).Open())),
	handlerkit.Row("key_resolver", "key expression", "`"+DefaultKey+"`", func(p *ruleParse, v string) (err error) {
		if p.r.Key, err = handlerkit.ParseKey(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}),
	wholeRow("requested_tokens", "`1`", 1, MaxBurst, "", func(p *ruleParse, n int64) { p.r.Cost = n }),
	// cost to max_cost: read by parseCost.
	readTogether("cost", "int, "+syntax.Span(1, int64(MaxBurst))+", or a placeholder", "`1`").In(syntax.WholeBounds(1, MaxBurst)),
	readTogether("count_status", "codes, ranges, classes", "none (every request spends)"),
	readTogether("response_cost", "`{http.response.header.<Name>}`", "none"),
	readTogether("reserve", "int, 0–`max_cost`", "`0`").In(syntax.WholeBounds(0, MaxBurst)).
		Needing("response_cost", "{http.response.header.X-Tokens}"),
	readTogether("max_cost", "int, 1–the smallest quota", "the smallest quota").In(syntax.WholeBounds(1, MaxBurst)).
		Needing("cost", "{http.request.header.X-Cost}"),
	handlerkit.Row("max_concurrent", "int, "+syntax.Span(0, int64(MaxConcurrent))+", or `adaptive`", "`0` (no cap)", func(p *ruleParse, v string) error {
		if isAdaptive(v) {
			return nil // parseFlow
		}
		n, ok := syntax.ParseWhole(v, 0, MaxConcurrent)
		if !ok {
			return p.Errorf("want a whole number %s (0 = no cap) or adaptive", syntax.Range(0, int64(MaxConcurrent)))
		}
		p.r.MaxConcurrent = int32(n)
		return nil
	}).In(syntax.WholeBounds(0, MaxConcurrent)),
	wholeRow("max_concurrent_total", "`0` (no cap)", 0, MaxBurst, " (0 = no cap)", func(p *ruleParse, n int64) { p.r.MaxConcurrentTotal = n }),
	handlerkit.Row("on_empty_key", "`deny [<status>]` or a key", "`deny 403`", func(p *ruleParse, v string) error {
		if err := p.r.parseEmptyKey(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}),
	boolRow("shadow", "`false`", func(r *Rule) *bool { return &r.Shadow }),
	boolRow("raw_keys", "`false`", func(r *Rule) *bool { return &r.RawKeys }),
	boolRow("record", "`true`", func(r *Rule) *bool { return &r.Record }),
	handlerkit.Row("overrides", "`key=qps[/burst], ...`", "none", func(p *ruleParse, v string) error {
		if err := p.r.parseOverrides(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}),
	wholeRow("max_keys", "`"+strconv.Itoa(DefaultMaxKeys)+"`", 1, MaxMaxKeys, "", func(p *ruleParse, n int64) { p.r.MaxKeys = int(n) }),
	statusRow("status", func(r *Rule) *int { return &r.Status }),
	statusRow("concurrency_status", func(r *Rule) *int { return &r.ConcurrencyStatus }),
	boolRow("headers", "`true`", func(r *Rule) *bool { return &r.Headers }),
	handlerkit.Row("body", "string, placeholders", "JSON, below", func(p *ruleParse, _ string) error {
		p.r.Body = p.Fields[p.Name]
		return nil
	}),
	boolRow("handle_errors", "`false`", func(r *Rule) *bool { return &r.HandleErrors }),
	handlerkit.Row("scope", "`local`, `cluster`", "`local`", func(p *ruleParse, v string) error {
		switch strings.ToLower(v) {
		case "local":
		case "cluster":
			p.r.Scope = "cluster"
		default:
			return p.Errorf("want local or cluster")
		}
		return nil
	}),
	only(onCluster, handlerkit.Row("on_redis_error", "`local`, `allow`, `deny [<status>]`", "`local`", parseRedisError)),
	only(onCluster, handlerkit.Row("redis_timeout", "duration, "+syntax.SpanDuration(minRedisTimeout, maxRedisTimeout), "`"+DefaultRedisTimeout.String()+"`", func(p *ruleParse, v string) error {
		d, err := syntax.ParseDuration(v)
		if err != nil {
			return p.Errorf("%v", err)
		}
		if d < minRedisTimeout || d > maxRedisTimeout {
			return p.Errorf("want a duration from 1ms to 10s (e.g. 50ms)")
		}
		p.r.RedisTimeout = d
		return nil
	}).In(syntax.DurationBounds(minRedisTimeout, maxRedisTimeout))),
	handlerkit.Row("control_behavior", "`reject`, `pace`, `warm_up`, `warm_up_pace`", "`reject`", parseControlBehavior),
	only(onQueue, durationRow("max_queue_wait", "`"+DefaultMaxQueueWait.String()+"`", 0, time.Minute, "500ms", func(p *ruleParse, d time.Duration) {
		p.r.Flow.MaxQueueWait = int64(d)
	})),
	only(onQueue, wholeRow("max_queued", "`"+strconv.Itoa(DefaultMaxQueued)+"`", 1, 1_000_000, "", func(p *ruleParse, n int64) {
		p.r.Flow.MaxQueued = n
	})),
	only(onWarmUp, handlerkit.Row("warm_up_period", "duration, > 0 and ≤ 24h", "required with warm-up", func(p *ruleParse, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return p.Errorf("want a duration > 0 and at most 24h (e.g. 30s)")
		}
		p.r.Flow.WarmUpPeriod = int64(d)
		return nil
	}).In(syntax.DurationBounds(0, 24*time.Hour).Open())),
	only(onWarmUp, handlerkit.Row("cold_factor", "number, > 1 and ≤ 1000", "`"+strconv.Itoa(DefaultColdFactor)+"`", func(p *ruleParse, v string) error {
		c, err := strconv.ParseFloat(v, 64)
		if err != nil || !(c > 1) || c > 1000 {
			return p.Errorf("want a number > 1 and at most 1000 (the cold rate is qps/cold_factor)")
		}
		p.r.Flow.ColdFactor = c
		return nil
	}).In(syntax.NumberBounds(1, 1000).Open())),
	only(onAdaptive, wholeRow("min_limit", "`"+strconv.Itoa(DefaultMinLimit)+"`", 1, 1_000_000, "", func(p *ruleParse, n int64) { p.adaptive.MinLimit = n })),
	only(onAdaptive, wholeRow("max_limit", "`"+strconv.Itoa(DefaultMaxLimit)+"`", 1, 1_000_000, "", func(p *ruleParse, n int64) { p.adaptive.MaxLimit = n })),
	only(onAdaptive, wholeRow("initial_limit", "`"+strconv.Itoa(DefaultInitialLimit)+"` (within `min_limit`–`max_limit`)", 1, 1_000_000, "", func(p *ruleParse, n int64) {
		p.adaptive.InitialLimit = n
	})),
	only(onAdaptive, handlerkit.Row("latency_tolerance", "number, "+syntax.Span(0, 10.0), "`"+strconv.FormatFloat(DefaultLatencyTolerance, 'g', -1, 64)+"`", func(p *ruleParse, v string) error {
		x, ok := syntax.ParseNumber(v, 0, 10)
		if !ok {
			return p.Errorf("want a number from 0 to 10 (0.25 = sampled latency may be 25%% above the minimum)")
		}
		p.adaptive.Tolerance = x
		return nil
	}).In(syntax.NumberBounds(0, 10))),
	only(onAdaptive, durationRow("sample_window", "`"+DefaultSampleWindow.String()+"`", 10*time.Millisecond, time.Minute, "", func(p *ruleParse, d time.Duration) {
		p.adaptive.SampleWindow = int64(d)
	})),
	only(onAdaptive, durationRow("min_rtt_interval", "`"+DefaultMinRTTInterval.String()+"`", time.Second, 24*time.Hour, "", func(p *ruleParse, d time.Duration) {
		p.adaptive.MinRTTInterval = int64(d)
	})),
	only(onAdaptive, handlerkit.Row("priority", "`critical`, `high`, `normal`, `low`, `sheddable`, `0`–`4`, or a placeholder", "`normal`", func(p *ruleParse, v string) error {
		if strings.Contains(v, "{") {
			p.r.priorityExpr = v // read per request; missing or unknown is normal
			return nil
		}
		c, ok := overload.ParseClass(v)
		if !ok {
			return p.Errorf("want critical, high, normal, low, sheddable, 0-4 or a placeholder such as {http.request.header.X-Priority}")
		}
		p.r.priority = c
		return nil
	})),
	only(onCluster, handlerkit.Row("lease_size", "int, 0–the quota", "`0` (off)", parseLeaseSize).In(syntax.WholeBounds(0, MaxBurst))),
	// parent to over_limit: nested_rule.go.
	handlerkit.Row("parent", "rule id", "none (a flat rule, or a tree's root)", parseParent),
	only(onParent, handlerkit.Row("parent_key", "placeholder", "the Redis hash `gateway:parent:<rule-id>`", parseParentKey)),
	only(onParent, handlerkit.Row("guarantee", "percent, 0–100", "`0` (borrows only)", parseGuarantee).In(syntax.NumberBounds(0, 100))),
	handlerkit.Row("over_limit", "`refuse`, `tag`, `demote`", "`refuse`", parseOverLimit),
)

// Bounds of redis_timeout.
const (
	minRedisTimeout = time.Millisecond
	maxRedisTimeout = 10 * time.Second
)

// read reads those of the named fields that are given, in order, each by
// its row.
func (p *ruleParse) read(names ...string) error {
	for _, name := range names {
		if v, ok := p.Get(name); ok {
			p.Name = name
			if err := fields.Lookup(name).Parse(p, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// readOr reads a field, or def where it is not given.
func (p *ruleParse) readOr(name, def string) error {
	v, ok := p.Get(name)
	if !ok {
		v = def
	}
	p.Name = name
	return fields.Lookup(name).Parse(p, v)
}

// The numeric rows of handlerkit, for this kind's parse state.
var (
	wholeRow    = handlerkit.WholeRow[*ruleParse]
	durationRow = handlerkit.DurationRow[*ruleParse]
)

// boolRow is true or false (also on, off).
func boolRow(name, def string, at func(*Rule) *bool) field {
	return handlerkit.Row(name, "`true` / `false`", def, func(p *ruleParse, v string) (err error) {
		if *at(p.r), err = syntax.ParseBool(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	})
}

// statusRow is the status of a refusal, 429 by default.
func statusRow(name string, at func(*Rule) *int) field {
	return handlerkit.Row(name, "400–599", "`"+strconv.Itoa(DefaultStatus)+"`", func(p *ruleParse, v string) (err error) {
		if *at(p.r), err = syntax.ParseStatus(v); err != nil {
			return p.Errorf("%v", err)
		}
		return nil
	}).In(syntax.WholeBounds(400, 599))
}

// condition is when some fields apply: holds tells it by what ParseRule
// has read before them, to says it in their errors, needs are fields that
// make it hold (the rows' Needs, for the tests' rules).
type condition struct {
	holds func(p *ruleParse) bool
	to    string
	needs []string
}

// When fields apply.
var (
	onTokenBucket   = condition{func(p *ruleParse) bool { return p.r.Type == TokenBucket }, "limit_type token_bucket", nil}
	onSlidingWindow = condition{func(p *ruleParse) bool { return p.r.Type == SlidingWindow }, "limit_type sliding_window", []string{"limit_type", "sliding_window"}}
	onCluster       = condition{func(p *ruleParse) bool { return p.r.Cluster() }, "scope cluster", []string{"scope", "cluster"}}
	onQueue         = condition{func(p *ruleParse) bool { return p.queues }, "control_behavior pace or warm_up_pace, or max_concurrent adaptive", []string{"control_behavior", "pace"}}
	onWarmUp        = condition{func(p *ruleParse) bool { return p.r.Flow.Behavior.Warms() }, "control_behavior warm_up or warm_up_pace", []string{"control_behavior", "warm_up", "warm_up_period", "30s"}}
	onAdaptive      = condition{func(p *ruleParse) bool { return p.adaptive != nil }, "max_concurrent adaptive", []string{"max_concurrent", "adaptive"}}
)

// only makes row an error, before its value is read, on a rule it does
// not apply to (where it would silently do nothing).
func only(c condition, row field) field {
	parse := row.Parse
	row.Parse = func(p *ruleParse, v string) error {
		if !c.holds(p) {
			return p.Errorf("applies to %s only", c.to)
		}
		return parse(p, v)
	}
	return row.Needing(c.needs...)
}

// readTogether is a field that a step of ParseRule reads with others
// (parseCalendar, parseCost): it has no parse of its own.
// fieldtable.CheckEveryRowRead holds that some step reads it.
func readTogether(name, syntax, def string) field {
	return handlerkit.Row[*ruleParse](name, syntax, def, nil)
}

func parseLimitType(p *ruleParse, v string) error {
	switch strings.ToLower(v) {
	case "token_bucket":
		p.r.Type = TokenBucket
	case "sliding_window":
		p.r.Type = SlidingWindow
	case "calendar":
		p.r.Type = Calendar
	default:
		return p.Errorf("want token_bucket, sliding_window or calendar")
	}
	return nil
}

// parseRedisError reads allow, deny [status] or local.
func parseRedisError(p *ruleParse, v string) error {
	r := p.r
	words := strings.Fields(strings.ToLower(v))
	if len(words) == 0 {
		return p.Errorf("want allow, deny [status] or local")
	}
	switch words[0] {
	case "allow":
		r.OnRedisError = FailAllow
	case "local":
		r.OnRedisError = FailLocal
	case "deny":
		r.OnRedisError = FailDeny
		if len(words) == 2 {
			s, err := strconv.Atoi(words[1])
			if err != nil || s < 400 || s > 599 {
				return p.Errorf("deny status: want an HTTP status 400-599")
			}
			r.RedisErrorStatus = s
		}
	default:
		return p.Errorf("want allow, deny [status] or local")
	}
	if len(words) > 2 || len(words) == 2 && words[0] != "deny" {
		return p.Errorf("want allow, deny [status] or local")
	}
	return nil
}

// parseLeaseSize reads lease_size once the cost and the quota are known.
func parseLeaseSize(p *ruleParse, v string) error {
	r := p.r
	n, ok := syntax.ParseWhole(v, 0, MaxBurst)
	if !ok {
		return p.Errorf("want a whole number >= 0 (0 = one Redis call per request), at most the quota")
	}
	if n > 0 && n < r.Cost {
		return p.Errorf("%d is less than requested_tokens %d", n, r.Cost)
	}
	if n > r.Limits.Quota {
		return p.Errorf("%d exceeds the quota %d (burst, or qps × window_size)", n, r.Limits.Quota)
	}
	r.LeaseSize = n
	return nil
}

// parseControlBehavior reads control_behavior, once limit_type, scope and
// lease_size are known.
func parseControlBehavior(p *ruleParse, v string) error {
	r, fl := p.r, &p.r.Flow
	switch strings.ToLower(v) {
	case "reject":
	case "pace":
		fl.Behavior = Pace
	case "warm_up":
		fl.Behavior = WarmUp
	case "warm_up_pace":
		fl.Behavior = WarmUpPace
	default:
		return p.Errorf("want reject, pace, warm_up or warm_up_pace")
	}
	if fl.Behavior != Reject {
		if r.Type != TokenBucket {
			return p.Errorf("%s applies to limit_type token_bucket only", fl.Behavior)
		}
		if r.Cluster() && r.LeaseSize > 0 {
			return p.Fields.Errorf("lease_size", "does not apply to control_behavior %s with scope cluster: each request reserves its own slot in Redis", fl.Behavior)
		}
	}
	if _, ok := p.Get("burst"); ok && fl.Behavior.Paces() {
		return p.Fields.Errorf("burst", "does not apply to control_behavior %s: requests are spaced 1/qps apart, and max_queue_wait bounds how far ahead they may queue", fl.Behavior)
	}
	return nil
}
