package ratelimit

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/ratelimit/answer"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// costExpr is a cost read from each request: a placeholder expression, with
// a request header read directly (no replacer, no allocation).
type costExpr struct {
	expr   string
	header string // canonical name when expr is one request header
}

func newCostExpr(v string) costExpr {
	c := costExpr{expr: v}
	if name, ok := strings.CutPrefix(v, "{http.request.header."); ok && strings.HasSuffix(name, "}") &&
		!strings.ContainsAny(name[:len(name)-1], "{}") {
		c.header = textproto.CanonicalMIMEHeaderKey(name[:len(name)-1])
	}
	return c
}

// eval reads the cost of request req: ok is false when it is missing, not
// a whole number, negative or above max.
func (c *costExpr) eval(req *http.Request, repl *caddy.Replacer, max int64) (int64, bool) {
	var v string
	if c.header != "" {
		if vals := req.Header[c.header]; len(vals) > 0 {
			v = vals[0]
		}
	} else if repl != nil {
		v = repl.ReplaceKnown(c.expr, "")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, false
	}
	return n, true
}

// parseCost reads cost (a whole number, or a placeholder per request) and
// max_cost. A number is the same as requested_tokens.
func (r *Rule) parseCost(f rulestore.Fields, get func(string) (string, bool)) error {
	v, ok := get("cost")
	if ok {
		if _, both := get("requested_tokens"); both {
			return f.Errorf("cost", "give cost or requested_tokens, not both")
		}
		r.costField = "cost"
		if strings.Contains(v, "{") {
			r.costExpr = newCostExpr(v)
		} else if r.Cost, ok = syntax.ParseWhole(v, 1, MaxBurst); !ok {
			return f.Errorf("cost", "want a whole number %s, or a placeholder such as {http.request.header.X-Batch-Size}", syntax.Range(1, int64(MaxBurst)))
		}
	}
	if v, ok := get("count_status"); ok {
		if err := r.CountStatus.Parse(v); err != nil {
			return f.Errorf("count_status", "%v", err)
		}
		r.Settles = true
	}
	if v, ok := get("response_cost"); ok {
		name, ok := strings.CutPrefix(v, "{http.response.header.")
		if !ok || !strings.HasSuffix(name, "}") || len(name) < 2 || strings.ContainsAny(name[:len(name)-1], "{} ") {
			return f.Errorf("response_cost", "want {http.response.header.<Name>}: a response header, or the trailer of that name")
		}
		r.respCost = textproto.CanonicalMIMEHeaderKey(name[:len(name)-1])
		r.respTrailer = http.TrailerPrefix + r.respCost
		r.Settles = true
	}
	r.countsAll = r.CountStatus == (handlerkit.StatusSet{})
	if v, ok := get("reserve"); ok {
		if r.respCost == "" {
			return f.Errorf("reserve", "applies with response_cost only")
		}
		if r.Reserve, ok = syntax.ParseWhole(v, 0, MaxBurst); !ok {
			return f.Errorf("reserve", "want a whole number %s", syntax.Range(0, int64(MaxBurst)))
		}
	}
	if v, ok := get("max_cost"); ok {
		if r.costExpr.expr == "" && r.respCost == "" {
			return f.Errorf("max_cost", "applies to a cost given by a placeholder, or response_cost, only")
		}
		if r.MaxCost, ok = syntax.ParseWhole(v, 1, MaxBurst); !ok {
			return f.Errorf("max_cost", "want a whole number %s", syntax.Range(1, int64(MaxBurst)))
		}
	}
	return nil
}

// finishCost checks a per-request cost against the rule once every quota
// is known: max_cost defaults to the smallest quota and may not exceed it
// (a request costing more could never pass).
func (r *Rule) finishCost(f rulestore.Fields) error {
	if r.Settles {
		field := "count_status"
		if r.respCost != "" {
			field = "response_cost"
		}
		if r.Flow.Behavior != Reject || r.Flow.Adaptive != nil {
			return f.Errorf(field, "applies to control_behavior reject without an adaptive limit only")
		}
		if r.LeaseSize > 0 {
			return f.Errorf(field, "does not apply with lease_size: a settlement goes to Redis, not to a lease")
		}
		// A key in debt needs longer than its refill time to be whole.
		r.Idle *= 2
	}
	if r.respCost != "" {
		if r.costExpr.expr != "" || r.costField == "cost" {
			return f.Errorf("response_cost", "give cost or response_cost, not both")
		}
		r.Cost = r.Reserve // admission needs the reserve only
	} else if r.costExpr.expr == "" {
		return nil
	}
	if r.Flow.Behavior != Reject {
		return f.Errorf("cost", "a cost per request applies to control_behavior reject only (pacing spaces requests of one cost)")
	}
	least := r.Limits.Quota
	for _, l := range r.Overrides {
		least = min(least, l.Quota)
	}
	if r.MaxCost == 0 {
		r.MaxCost = least
	} else if r.MaxCost > least {
		return f.Errorf("max_cost", "%d exceeds the quota %d (burst, or qps × window_size): such a request could never pass", r.MaxCost, least)
	}
	if r.Reserve > r.MaxCost {
		return f.Errorf("reserve", "%d exceeds max_cost %d", r.Reserve, r.MaxCost)
	}
	if r.LeaseSize > 0 && r.LeaseSize < r.MaxCost {
		return f.Errorf("lease_size", "%d is less than max_cost %d", r.LeaseSize, r.MaxCost)
	}
	return nil
}

// badCost refuses a request whose cost is missing, not a whole number or
// out of range: a client error, answered before any token is spent.
func (h *Handler) badCost(w http.ResponseWriter, rule *Rule, lim *limiter, pub handlerkit.Placeholders, ph *placeholders) error {
	lim.counters.badCost.Inc()
	ph.result = resultBadCost
	ph.publish(pub)
	if rule.HandleErrors {
		return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("bad cost for rule %s", rule.ID))
	}
	answer.WriteBody(w, http.StatusBadRequest, `{"error":"bad_cost","rule":"`+rule.ID+`","max_cost":`+strconv.FormatInt(rule.MaxCost, 10)+`}`)
	return nil
}
