package engine

import (
	"strconv"
)

// LimitType is a rule's engine.
type LimitType uint8

const (
	TokenBucket LimitType = iota
	SlidingWindow
	Calendar // quota per calendar period (calendar.go)
)

// String is the limit_type field's value.
func (t LimitType) String() string {
	switch t {
	case SlidingWindow:
		return "sliding_window"
	case Calendar:
		return "calendar"
	}
	return "token_bucket"
}

// Limits are the numbers of one quota.
type Limits struct {
	QPS    float64
	Burst  float64 // token bucket capacity
	Window int64   // sliding window size, ns
	Max    float64 // sliding window: requests per window (qps × window)

	// Advertised in headers: RateLimit-Policy q and w, precomputed.
	Quota      int64
	WindowSecs int64 // seconds
	Policy     string
	QuotaStr   string
	QuotaAny   any // boxed once, so setting the placeholder does not allocate

	// ScriptArgs are the engine's numbers for the cluster scripts, boxed
	// once: token bucket qps and burst, sliding window µs and limit.
	ScriptArgs [2]any

	// Warm is the warm-up curve of a warm_up/warm_up_pace rule, derived
	// once from QPS (its divisions would double the decision's cost).
	Warm WarmModel
}

// BoxScriptArgs boxes the numbers of l for the cluster scripts.
func (l *Limits) BoxScriptArgs(t LimitType) {
	if t == SlidingWindow || t == Calendar {
		l.ScriptArgs = [2]any{l.Window / 1000, l.Max}
	} else {
		l.ScriptArgs = [2]any{l.QPS, l.Burst}
	}
}

// Advertise precomputes the header values of l's quota and window.
func (l *Limits) Advertise(id string) {
	l.QuotaStr = strconv.FormatInt(l.Quota, 10)
	l.QuotaAny = l.Quota
	l.Policy = `"` + id + `";q=` + strconv.FormatInt(l.Quota, 10) + ";w=" + strconv.FormatInt(l.WindowSecs, 10)
}

// Idle is how long until an untouched key's state equals a fresh one.
func (l *Limits) Idle(t LimitType) int64 {
	switch t {
	case SlidingWindow:
		return 2 * l.Window
	case Calendar:
		return 0 // the rule's period says (ParseRule)
	}
	return CeilNanos(l.Burst / l.QPS)
}

// LimitsFor is the quota of key under r: its override's, or the rule's.
func (r *Spec) LimitsFor(key []byte) *Limits {
	if len(r.Overrides) > 0 {
		if l := r.Overrides[string(key)]; l != nil {
			return l
		}
	}
	return &r.Limits
}
