package ratelimit

import (
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/sluicegw/sluice/ratelimit/answer"
)

// The answers of a refused request (pipeline.go's reject step): by its
// rule's status and body, or as an error for Caddy's handle_errors.

// reject answers a request rule refused with decision d.
func (h *Handler) reject(w http.ResponseWriter, rule *Rule, lim *limiter, d *Decision, p *pass) error {
	status, res := rule.Status, resultRateLimited
	retry := answer.CeilSeconds(d.RetryAfter)
	switch d.Reason {
	case RateLimited:
		lim.counters.rejected.Inc()
	case RedisUnavailable:
		status, res = rule.RedisErrorStatus, resultRedisUnavailable
		retry = 1 // the health probe runs every 250ms
		lim.counters.unavailable.Inc()
	default:
		status, res = rule.ConcurrencyStatus, resultTooManyInFlight
		retry = 1 // a slot frees when a request ends; a short hint
		lim.counters.concurrency.Inc()
	}
	if retry < 1 {
		retry = 1
	}
	name := resultNames[res]
	w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	if d.Reason == OverAdaptiveLimit {
		w.Header().Set(PriorityHeader, d.Class.String())
	}
	p.ph.result, p.ph.retry = res, uint32(min(retry, math.MaxUint32))
	p.ph.publish(p.pub)
	if rule.HandleErrors {
		return caddyhttp.Error(status, fmt.Errorf("%s by rule %s", name, rule.ID))
	}
	body := `{"error":"` + name + `","rule":"` + rule.ID + `","retry_after":` + strconv.FormatInt(retry, 10) + "}"
	if rule.Body != "" {
		body = rule.Body
		if p.repl != nil {
			body = p.repl.ReplaceKnown(body, "")
		}
	}
	answer.WriteBody(w, status, body)
	return nil
}

// denyEmptyKey refuses a request whose key is empty (a shadow rule's is
// left out of the decision instead, pass.keys).
func (h *Handler) denyEmptyKey(w http.ResponseWriter, rule *Rule, lim *limiter, p *pass) error {
	lim.counters.emptyKey.Inc()
	status := rule.EmptyKeyStatus
	if status == 0 {
		status = http.StatusForbidden
	}
	p.ph.result = resultEmptyKey
	p.ph.publish(p.pub)
	if rule.HandleErrors {
		return caddyhttp.Error(status, fmt.Errorf("empty rate limit key for rule %s", rule.ID))
	}
	answer.WriteBody(w, status, `{"error":"empty_key","rule":"`+rule.ID+`"}`)
	return nil
}
