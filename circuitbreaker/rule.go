package circuitbreaker

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

func init() { handlerkit.RegisterRules(rulestore.CircuitBreaker, fields, ParseRule) }

// Rule is a validated circuit_breaker rule. Its fields have the same names
// in the Caddyfile, in JSON and in the Redis hash circuit_breaker:rule:<id>.
type Rule struct {
	ID       string
	Settings Settings
	// SlowCallDuration marks a call slow when it takes at least this long.
	SlowCallDuration time.Duration
	// Failures are the response statuses that count as failures.
	Failures StatusSet
	// Key is a placeholder expression: one breaker per resolved value.
	Key string

	// The open response.
	Status       int
	Body         string
	Headers      http.Header
	HandleErrors bool
	// RawKeys shows key values as they are in logs, events and
	// /sluice/state; by default they are masked (handlerkit.MaskKey), as
	// the rate limiter does.
	RawKeys bool
}

// Defaults of the seed design.
const (
	DefaultFailureThreshold = 10
	DefaultSuccessThreshold = 5
	DefaultOpenDuration     = 30 * time.Second
	DefaultHalfOpenRequests = 1
	DefaultWindowCount      = 100
	DefaultMinRequests      = 10
	DefaultStatus           = http.StatusServiceUnavailable
)

// ParseRule validates a rule's fields.
func ParseRule(id string, f rulestore.Fields) (*Rule, error) {
	r := &Rule{
		ID: id,
		Settings: Settings{
			FailureThreshold: DefaultFailureThreshold,
			SuccessThreshold: DefaultSuccessThreshold,
			OpenDuration:     DefaultOpenDuration,
			HalfOpenRequests: DefaultHalfOpenRequests,
		},
		Status:  DefaultStatus,
		Headers: http.Header{},
	}
	r.Failures.AddRange(500, 599)
	s := &r.Settings
	p := &ruleParse{FieldReader: handlerkit.FieldReader{Fields: f}, r: r}
	if err := fields.ReadEach(p, &p.FieldReader, func(name string) error {
		return f.Errorf(name, "unknown field (want %s)", fieldNames)
	}); err != nil {
		return nil, err
	}
	minSet, windowSet := p.minSet, p.windowSet
	if s.MaxOpenDuration > 0 && s.MaxOpenDuration < s.OpenDuration {
		return nil, f.Errorf("max_open_duration", "must not be shorter than open_duration (%v)", s.OpenDuration)
	}
	if s.SlowCallRate > 0 && r.SlowCallDuration == 0 {
		return nil, f.Errorf("slow_call_rate", "needs slow_call_duration")
	}
	if r.SlowCallDuration > 0 && s.SlowCallRate == 0 {
		return nil, f.Errorf("slow_call_duration", "needs slow_call_rate")
	}
	if s.hasWindow() {
		if !windowSet {
			s.WindowCount = DefaultWindowCount
		}
		if !minSet {
			s.MinRequests = DefaultMinRequests
			if s.WindowCount > 0 {
				s.MinRequests = min(s.MinRequests, s.WindowCount)
			}
		}
		if s.WindowCount > 0 && s.MinRequests > s.WindowCount {
			return nil, f.Errorf("min_requests", "larger than the window of %d calls: the rate could never trip", s.WindowCount)
		}
	} else if windowSet || minSet {
		field := "window"
		if !windowSet {
			field = "min_requests"
		}
		return nil, f.Errorf(field, "has no effect without failure_rate or slow_call_rate")
	}
	return r, nil
}

// maxCount bounds the counts: thresholds, probes, requests.
const maxCount = 1_000_000

func intField(f rulestore.Fields, name string, lowest int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(f[name]))
	if err != nil || n < lowest || n > maxCount {
		return 0, f.Errorf(name, "want a whole number from %d to %d", lowest, maxCount)
	}
	return n, nil
}

// durationField accepts durations with a unit (500ms, 30s); a bare number
// is an error, since it could mean milliseconds or seconds.
func durationField(f rulestore.Fields, name string, zeroOK bool) (time.Duration, error) {
	d, err := syntax.ParseDuration(f[name])
	if err != nil {
		return 0, f.Errorf(name, "%v", err)
	}
	if d < 0 || (d == 0 && !zeroOK) {
		return 0, f.Errorf(name, "must be positive")
	}
	if d > syntax.MaxRuleDuration {
		return 0, f.Errorf(name, "at most 366 days")
	}
	return d, nil
}

func percentField(f rulestore.Fields, name string) (float64, error) {
	v := strings.TrimSuffix(strings.TrimSpace(f[name]), "%")
	p, ok := syntax.ParseNumber(v, 0, 100)
	if !ok || p == 0 {
		return 0, f.Errorf(name, "want a percentage above 0 and at most 100")
	}
	return p, nil
}

// StatusSet is a set of HTTP status codes (handlerkit.StatusSet).
type StatusSet = handlerkit.StatusSet
