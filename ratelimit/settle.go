package ratelimit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// Settling: a rule with count_status admits a request when its key holds
// the request's cost, spends nothing up front, and charges the cost once
// the response is done, if its status is one counted. The charge may take
// the key below zero (debt): the key's next requests are refused until the
// refill (or the window sliding on) has paid it back.

// serveSettled serves an admitted request of a settling rule. Its key is
// charged as soon as the response's status is known (before any byte of
// it leaves), so a client cannot send its next request before the charge;
// a handler error that wrote nothing is charged by the status Caddy will
// answer.
func serveSettled(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, rule *Rule, lim *limiter,
	eng Engine, key []byte, cost int64, d Decision) error {
	if d.slot != nil || d.total {
		defer eng.Release(&d)
	}
	sw := &settleWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		rule: rule, lim: lim, eng: eng, key: string(key), cost: cost}
	err := next.ServeHTTP(sw, r)
	if sw.status == 0 {
		sw.status = errorStatus(err)
	}
	if !sw.settled {
		sw.settle()
	}
	return err
}

// settleWriter charges its request's key once, by the response's status.
type settleWriter struct {
	caddyhttp.ResponseWriterWrapper
	rule    *Rule
	lim     *limiter
	eng     Engine
	key     string
	cost    int64
	status  int
	settled bool
}

// WriteHeader notes the first final status (1xx are informational) and,
// without a response_cost to wait for, settles by it.
func (w *settleWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		if w.rule.respCost == "" {
			w.settle()
		}
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write notes an implicit 200.
func (w *settleWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(p)
}

// settle charges the key by the response: its status, and the response
// cost from its header or trailer (read once the response is done).
func (w *settleWriter) settle() {
	w.settled = true
	cost := w.cost
	if name := w.rule.respCost; name != "" {
		cost = w.rule.responseCost(w.Header(), name, w.cost)
	}
	if charge := w.rule.settlement(w.status, cost); charge != 0 {
		settle(w.eng, w.rule, []byte(w.key), w.lim.now(), charge)
	}
}

// responseCost reads a response's cost from header name, or the trailer of
// that name, up to max_cost; missing or not a whole number ≥ 0, the
// reserve stands (reserved).
func (r *Rule) responseCost(h http.Header, name string, reserved int64) int64 {
	v := h.Get(name)
	if v == "" {
		v = h.Get(http.TrailerPrefix + name)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return reserved
	}
	return min(n, r.MaxCost)
}

// settlement is what a response of status costs beyond what its request
// spent when admitted (negative: a refund).
func (r *Rule) settlement(status int, cost int64) int64 {
	if r.CountStatus == (handlerkit.StatusSet{}) || r.CountStatus.Has(status) {
		return cost - r.Reserve
	}
	return -r.Reserve
}

// errorStatus is the status Caddy answers for a handler's error (500 when
// the error carries none); 200 for no error and nothing written.
func errorStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		return he.StatusCode
	}
	return http.StatusInternalServerError
}

// settle charges n tokens (refunds -n) to key through the engine's
// concrete type, so the key's buffer stays on the stack.
func settle(eng Engine, r *Rule, key []byte, now, n int64) {
	switch e := eng.(type) {
	case *localEngine:
		e.settle(r, key, now, n)
	case *clusterEngine:
		e.settle(r, key, now, n)
	}
}

// settle charges n tokens to key's state in this process.
func (e *localEngine) settle(r *Rule, key []byte, now, n int64) {
	l := r.limitsFor(key)
	s := e.tab.shard(key)
	s.mu.Lock()
	ent := e.tab.get(s, key, now, r.idle, max(1, r.MaxKeys/len(e.tab.shards)))
	if e.typ == Calendar {
		chargeCalendar(ent, r, now, n)
	} else if e.typ == SlidingWindow {
		ent.sw.charge(now, l.Window, float64(n))
	} else {
		ent.tb.charge(now, l.QPS, l.Burst, float64(n))
	}
	s.mu.Unlock()
}

// limitsFor is the quota of key under r: its override's, or the rule's.
func (r *Rule) limitsFor(key []byte) *Limits {
	if len(r.Overrides) > 0 {
		if l := r.Overrides[string(key)]; l != nil {
			return l
		}
	}
	return &r.Limits
}
