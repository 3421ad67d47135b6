package rulestore

import "github.com/sluicegw/sluice/rulestore/syntax"
import "net/http"

// The typed rules. Each field's json name is its Redis field name; the
// handlers' docs (docs/*.md) give each field's range and default. In JSON a
// value may also be a string in the Redis syntax ("qps": "5").

// RateLimitSpec is a rate_limit rule (docs/ratelimit.md).
type RateLimitSpec struct {
	// ID names an inline rule (labels, error bodies, RateLimit-Policy);
	// without it an inline rule's id is inline:<hash>. Not for rules of the
	// rulestore app, whose id is their key.
	ID string `json:"id,omitempty"`
	// LimitType is token_bucket (default), sliding_window or calendar
	// (implied by quota).
	LimitType string `json:"limit_type,omitempty"`
	// QPS is the allowed requests per second (required, but for a
	// calendar quota).
	QPS *float64 `json:"qps,omitempty"`
	// Quota is a calendar quota's requests per period (instead of qps).
	Quota *int64 `json:"quota,omitempty"`
	// Period is a calendar quota's window: minute, hour, day, week
	// (from Monday) or month.
	Period string `json:"period,omitempty"`
	// Timezone is the IANA zone whose calendar the windows follow
	// (default UTC).
	Timezone string `json:"timezone,omitempty"`
	// Burst is the token bucket's size (0 = one second's worth of qps).
	Burst *int64 `json:"burst,omitempty"`
	// WindowSize is the sliding window's length (default 1s).
	WindowSize *syntax.Duration `json:"window_size,omitempty" sluice:"seconds"`
	// KeyResolver says what a quota is counted per: userId, ip, a header,
	// a placeholder, or several, the first non-empty one winning.
	KeyResolver string `json:"key_resolver,omitempty"`
	// RequestedTokens is the cost of one request (default 1).
	RequestedTokens *int64 `json:"requested_tokens,omitempty"`
	// Cost is what a request spends: a whole number, or a placeholder
	// evaluated per request (e.g. {http.request.header.X-Batch-Size}).
	Cost string `json:"cost,omitempty"`
	// MaxCost bounds a per-request cost (default: the quota).
	MaxCost *int64 `json:"max_cost,omitempty"`
	// CountStatus: only responses with these statuses spend the cost
	// (codes, ranges 400-499 or classes 4xx), charged after the response.
	CountStatus []string `json:"count_status,omitempty"`
	// ResponseCost is the cost read when the response is done, from a
	// response header or trailer: {http.response.header.X-Tokens-Used}.
	ResponseCost string `json:"response_cost,omitempty"`
	// Reserve is what a request with a response_cost spends up front,
	// settled against the response cost afterwards.
	Reserve *int64 `json:"reserve,omitempty"`
	// MaxConcurrent caps the requests in flight per key: a number (0 = no
	// cap) or adaptive.
	MaxConcurrent string `json:"max_concurrent,omitempty"`
	// MaxConcurrentTotal caps the requests in flight over all keys.
	MaxConcurrentTotal *int64 `json:"max_concurrent_total,omitempty"`
	// OnEmptyKey is what a request without a key gets: deny [status] or a
	// fallback key.
	OnEmptyKey string `json:"on_empty_key,omitempty"`
	// Shadow counts and logs refusals but lets the requests through.
	Shadow *bool `json:"shadow,omitempty"`
	// Overrides gives some keys limits of their own.
	Overrides string `json:"overrides,omitempty"`
	// MaxKeys bounds the keys tracked at once.
	MaxKeys *int64 `json:"max_keys,omitempty"`
	// Status of a rate refusal (400-599, default 429).
	Status *int64 `json:"status,omitempty"`
	// ConcurrencyStatus of an in-flight refusal (400-599, default 429).
	ConcurrencyStatus *int64 `json:"concurrency_status,omitempty"`
	// Headers sends the RateLimit and X-RateLimit-* headers (default true).
	Headers *bool `json:"headers,omitempty"`
	// Body of a refusal (placeholders allowed); default a JSON error.
	Body string `json:"body,omitempty"`
	// HandleErrors hands a refusal to the site's handle_errors routes.
	HandleErrors *bool `json:"handle_errors,omitempty"`
	// Scope is local (default) or cluster (one quota in Redis for all
	// instances).
	Scope string `json:"scope,omitempty"`
	// OnRedisError is what a cluster rule does without Redis: allow,
	// deny [status] or local.
	OnRedisError string `json:"on_redis_error,omitempty"`
	// RedisTimeout bounds a cluster rule's Redis call.
	RedisTimeout *syntax.Duration `json:"redis_timeout,omitempty"`
	// LeaseSize is how many tokens a cluster rule takes from Redis at once.
	LeaseSize *int64 `json:"lease_size,omitempty"`
	// RawKeys shows keys unmasked in logs and the admin API.
	RawKeys *bool `json:"raw_keys,omitempty"`
	// Record keeps the record of the rule's recent traffic that previews
	// replay (default true).
	Record *bool `json:"record,omitempty"`
	// ControlBehavior is reject (default), pace, warm_up or warm_up_pace.
	ControlBehavior string `json:"control_behavior,omitempty"`
	// MaxQueueWait bounds how long pacing, or the queue of an adaptive
	// in-flight cap, holds a request.
	MaxQueueWait *syntax.Duration `json:"max_queue_wait,omitempty"`
	// MaxQueued bounds the requests pacing, or the queue of an adaptive
	// in-flight cap, holds at once.
	MaxQueued *int64 `json:"max_queued,omitempty"`
	// WarmUpPeriod is how long a cold limit takes to reach qps.
	WarmUpPeriod *syntax.Duration `json:"warm_up_period,omitempty"`
	// ColdFactor: a cold limit starts at qps/cold_factor.
	ColdFactor *float64 `json:"cold_factor,omitempty"`
	// MinLimit is the lowest an adaptive in-flight cap goes, and the
	// concurrency at which its minimum latency is measured.
	MinLimit *int64 `json:"min_limit,omitempty"`
	// MaxLimit is the highest an adaptive in-flight cap goes.
	MaxLimit *int64 `json:"max_limit,omitempty"`
	// InitialLimit is where an adaptive in-flight cap starts.
	InitialLimit *int64 `json:"initial_limit,omitempty"`
	// LatencyTolerance is how far above the minimum latency an adaptive
	// cap lets sampled latency go (0.05 = 5%).
	LatencyTolerance *float64 `json:"latency_tolerance,omitempty"`
	// SampleWindow is an adaptive cap's sampling period.
	SampleWindow *syntax.Duration `json:"sample_window,omitempty"`
	// MinRTTInterval is how often an adaptive cap re-measures the minimum.
	MinRTTInterval *syntax.Duration `json:"min_rtt_interval,omitempty"`
	// Priority is a request's class under an adaptive cap: critical,
	// high, normal (default), low, sheddable, 0-4, or a placeholder such
	// as {http.request.header.X-Priority} (missing or unknown: normal).
	Priority string `json:"priority,omitempty"`
	// Parent is the rule whose budget this rule's keys spend too: a
	// nested quota (key → team → org), decided at every level at once.
	Parent string `json:"parent,omitempty"`
	// ParentKey is the parent's key for a request, a placeholder (e.g.
	// {http.request.header.X-Team}); without it the key is read from the
	// Redis hash gateway:parent:<rule-id>.
	ParentKey string `json:"parent_key,omitempty"`
	// Guarantee is a key's share of its parent's rate or quota, in
	// percent, always available to it (0: it only borrows).
	Guarantee string `json:"guarantee,omitempty"`
	// OverLimit is what a refusal does: refuse (default), tag (let it
	// through, marked) or demote (let it through as sheddable).
	OverLimit string `json:"over_limit,omitempty"`
}

// CircuitBreakerSpec is a circuit_breaker rule (docs/circuitbreaker.md).
type CircuitBreakerSpec struct {
	// ID names an inline rule; see RateLimitSpec.ID.
	ID string `json:"id,omitempty"`
	// FailureThreshold is the consecutive failures that open the breaker.
	FailureThreshold *int64 `json:"failure_threshold,omitempty"`
	// SuccessThreshold is the half-open successes that close it.
	SuccessThreshold *int64 `json:"success_threshold,omitempty"`
	// OpenDuration is how long it stays open before a trial.
	OpenDuration *syntax.Duration `json:"open_duration,omitempty"`
	// MaxOpenDuration caps the open time as it backs off (0 = no backoff).
	MaxOpenDuration *syntax.Duration `json:"max_open_duration,omitempty"`
	// Window of a rate trigger: a duration (60s) or a call count (100).
	Window string `json:"window,omitempty"`
	// FailureRate opens the breaker at this percentage of failures.
	FailureRate *float64 `json:"failure_rate,omitempty" sluice:"percent"`
	// MinRequests in the window before a rate can trip.
	MinRequests *int64 `json:"min_requests,omitempty"`
	// SlowCallDuration: a call at least this long is slow.
	SlowCallDuration *syntax.Duration `json:"slow_call_duration,omitempty"`
	// SlowCallRate opens the breaker at this percentage of slow calls.
	SlowCallRate *float64 `json:"slow_call_rate,omitempty" sluice:"percent"`
	// FailureStatuses are the response statuses that count as failures:
	// codes, ranges (500-599) or classes (5xx).
	FailureStatuses []string `json:"failure_statuses,omitempty"`
	// HalfOpenRequests are the trial requests let through half-open.
	HalfOpenRequests *int64 `json:"half_open_requests,omitempty"`
	// RampDuration lets traffic back in gradually after closing.
	RampDuration *syntax.Duration `json:"ramp_duration,omitempty"`
	// Key gives each value of a placeholder its own breaker.
	Key string `json:"key,omitempty"`
	// RawKeys shows keys unmasked in logs and the admin API.
	RawKeys *bool `json:"raw_keys,omitempty"`
	// State is auto (default), force_open, force_closed or disabled.
	State string `json:"state,omitempty"`
	// Status of the open response (400-599, default 503).
	Status *int64 `json:"status,omitempty"`
	// Body of the open response (placeholders allowed).
	Body string `json:"body,omitempty"`
	// Headers of the open response.
	Headers http.Header `json:"headers,omitempty"`
	// Header is one header of the open response, "Name value" (Redis).
	Header string `json:"header,omitempty" renamed:"headers"`
	// HandleErrors hands the open response to the site's handle_errors.
	HandleErrors *bool `json:"handle_errors,omitempty"`
}

// GraySpec is a gray (canary) rule (docs/grayroute.md).
type GraySpec struct {
	// MatchTag is the header, query parameter or cookie to match; * or
	// empty matches every request.
	MatchTag string `json:"match_tag,omitempty"`
	// MatchValue is the values the tag must have.
	MatchValue string `json:"match_value,omitempty"`
	// MatchSource is where the tag is read: header, query, cookie or any.
	MatchSource string `json:"match_source,omitempty"`
	// TargetVersion is the canary version (required).
	TargetVersion string `json:"target_version,omitempty"`
	// Weight is the percentage of matching traffic sent to the target.
	Weight *float64 `json:"weight,omitempty"`
	// FallbackVersion serves matching traffic outside the weight.
	FallbackVersion string `json:"fallback_version,omitempty"`
	// HashKey buckets requests (default userId).
	HashKey string `json:"hash_key,omitempty"`
	// Ramp raises the weight on a schedule.
	Ramp string `json:"ramp,omitempty"`
	// FallbackOnOpen names a circuit_breaker rule whose open breaker
	// sends traffic to the fallback.
	FallbackOnOpen string `json:"fallback_on_open,omitempty"`
	// Analysis turns on automatic canary analysis.
	Analysis *bool `json:"analysis,omitempty"`
	// AnalysisInterval is the analysis period.
	AnalysisInterval *syntax.Duration `json:"analysis_interval,omitempty"`
	// MinSamples are the canary requests an interval needs to be judged.
	MinSamples *int64 `json:"min_samples,omitempty"`
	// MaxLatencyRatio is the canary's allowed latency over the baseline's.
	MaxLatencyRatio *float64 `json:"max_latency_ratio,omitempty"`
	// MinLatencyDelta is the latency difference below which no canary
	// counts as slower (default 5ms).
	MinLatencyDelta *syntax.Duration `json:"min_latency_delta,omitempty"`
	// LatencyPercentile is the percentile compared.
	LatencyPercentile *float64 `json:"latency_percentile,omitempty"`
	// StepWeight is the weight added per healthy interval.
	StepWeight *float64 `json:"step_weight,omitempty"`
	// MaxWeight is the weight the analysis stops at.
	MaxWeight *float64 `json:"max_weight,omitempty"`
	// FailureThreshold is the failed intervals that roll the canary back.
	FailureThreshold *int64 `json:"failure_threshold,omitempty"`
	// MaxStepDuration bounds a weight's time without evidence either way.
	MaxStepDuration *syntax.Duration `json:"max_step_duration,omitempty"`
	// OnNoEvidence is advance or hold, what a step does at that bound.
	OnNoEvidence string `json:"on_no_evidence,omitempty"`
	// State is the canary's state (e.g. rolled_back).
	State string `json:"state,omitempty"`
}

// BindingSpec is a route binding: the rules that apply to a route.
type BindingSpec struct {
	// RateLimit is the rate_limit rule's id.
	RateLimit string `json:"rate_limit,omitempty"`
	// CircuitBreaker is the circuit_breaker rule's id.
	CircuitBreaker string `json:"circuit_breaker,omitempty"`
	// Gray are the gray rules' ids, in evaluation order.
	Gray []string `json:"gray,omitempty"`
}

// Kind returns the spec's rule kind.
func (*RateLimitSpec) Kind() Kind      { return RateLimit }
func (*CircuitBreakerSpec) Kind() Kind { return CircuitBreaker }
func (*GraySpec) Kind() Kind           { return Gray }
func (*BindingSpec) Kind() Kind        { return Binding }

// UnmarshalJSON reads the rule typed or with Redis-syntax strings.
func (s *RateLimitSpec) UnmarshalJSON(b []byte) error      { return decodeSpec(s, b) }
func (s *CircuitBreakerSpec) UnmarshalJSON(b []byte) error { return decodeSpec(s, b) }
func (s *GraySpec) UnmarshalJSON(b []byte) error           { return decodeSpec(s, b) }
func (s *BindingSpec) UnmarshalJSON(b []byte) error        { return decodeSpec(s, b) }
