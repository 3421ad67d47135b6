package ratelimit

import (
	"github.com/sluicegw/sluice/internal/handlerkit"
)

// placeholderNames are the {http.ratelimit.*} placeholders a decision sets.
var placeholderNames = []string{
	"http.ratelimit.rule", "http.ratelimit.key", "http.ratelimit.remaining", "http.ratelimit.limit",
	"http.ratelimit.result", "http.ratelimit.retry_after", "http.ratelimit.queue_wait",
	"http.ratelimit.priority", "http.ratelimit.over_limit",
}

// shortKey is how many bytes of a key placeholders holds in place; a
// longer key is copied to a string (one more allocation).
const shortKey = 63

// placeholders are one decision's {http.ratelimit.*} values, answered
// lazily (handlerkit.Publish): the key is formatted, the remaining count
// boxed, only when read. It is a value of 120 bytes, so the provider that
// holds it is one allocation of 144 (with the provider's function, its
// generic dictionary and the request's vars map; TestPlaceholdersSize).
type placeholders struct {
	rule      *Rule
	over      *Rule   // over_limit tag or demote let the request through over this rule (overlimit.go)
	limits    *Limits // the quota's, nil when no quota was consulted
	remaining int64
	long      string // the key, when longer than shortKey
	retry     uint32 // retry_after in seconds (at most ~136 years), 0 when not refused
	result    result
	n         uint8 // key length in short
	hasKey    bool
	paces     bool  // a paced request that did not wait: queue_wait is 0s
	class     uint8 // the priority class under max_concurrent adaptive, plus 1 (0: none)
	short     [shortKey]byte
}

// result is {http.ratelimit.result}.
type result uint8

const (
	resultNone result = iota
	resultAllowed
	resultShadowRejected
	resultRateLimited
	resultTooManyInFlight
	resultRedisUnavailable
	resultEmptyKey
	resultBadCost
	resultTagged  // over_limit tag let it through over a limit
	resultDemoted // over_limit demote did
)

var resultNames = [...]string{"", "allowed", "shadow_rejected", "rate_limited", "too_many_in_flight", "redis_unavailable", "empty_key", "bad_cost", "tagged", "demoted"}

// setKey records the request's key.
func (p *placeholders) setKey(key []byte) {
	p.hasKey = true
	if len(key) <= shortKey {
		p.n = uint8(copy(p.short[:], key))
	} else {
		p.long = string(key)
	}
}

// Placeholder answers one {http.ratelimit.*} placeholder.
func (p placeholders) Placeholder(name string) (any, bool) {
	switch name {
	case "http.ratelimit.rule":
		return p.rule.idAny, true
	case "http.ratelimit.key":
		if !p.hasKey {
			return nil, false
		}
		if p.long != "" {
			return p.long, true
		}
		return string(p.short[:p.n]), true
	case "http.ratelimit.remaining":
		if p.limits == nil {
			return nil, false
		}
		return p.remaining, true
	case "http.ratelimit.limit":
		if p.limits == nil {
			return nil, false
		}
		return p.limits.QuotaAny, true
	case "http.ratelimit.result":
		if p.result == resultNone {
			return nil, false
		}
		return resultNames[p.result], true
	case "http.ratelimit.retry_after":
		if p.retry == 0 {
			return nil, false
		}
		return int64(p.retry), true
	case "http.ratelimit.queue_wait":
		if !p.paces {
			return nil, false
		}
		return zeroWait, true
	case "http.ratelimit.over_limit":
		if p.over == nil {
			return "", p.result != resultNone // known, empty, once decided: for header_up
		}
		return p.over.idAny, true
	case "http.ratelimit.priority":
		if p.class == 0 {
			return nil, false
		}
		return classAny[p.class-1], true
	}
	return nil, false
}

// publish makes the placeholders readable on the request.
func (p *placeholders) publish(pub handlerkit.Placeholders) {
	handlerkit.Publish(pub, handlerkit.RateLimit, *p, placeholderNames)
}
