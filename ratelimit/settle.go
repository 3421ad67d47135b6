package ratelimit

import (
	"net/http"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/settlement"
)

// Settling: a rule with count_status admits a request when its key holds
// the request's cost, spends nothing up front, and charges the cost once
// the response is done, if its status is one counted. The charge may take
// the key below zero (debt): the key's next requests are refused until the
// refill (or the window sliding on) has paid it back.
//
// An admitted request of a settling rule is served through a settle
// writer (pipeline_serve.go), which charges its key however the request
// ends (settleWriter.done): a finished answer by its status and reported
// cost (settlement.ResponseCost), an answer cut short (the client hung up
// mid-stream, the handler panicked or failed after the answer began) by
// the cost reported so far or else max_cost, and a request whose client
// left before any answer by what its admission took. A count_status rule
// is charged as soon as the response's status is known (before any byte
// of it leaves), so a client cannot send its next request before the
// charge.

// settleWriters are the settle writers of finished requests, reused: a
// writer is one allocation per request otherwise. A handler does not use
// its writer after its ServeHTTP returned (net/http requires as much of
// its own), so one writer serves one request at a time. A request that
// panics leaves its writer to the collector.
var settleWriters = sync.Pool{New: func() any { return new(settleWriter) }}

// settleWriter charges its request's key once, by the response's status.
type settleWriter struct {
	caddyhttp.ResponseWriterWrapper
	req     *http.Request // for its context: is the client still there?
	rule    *Rule
	lim     *limiter
	eng     Engine
	key     []byte // the request's key, copied into the writer's own buffer
	cost    int64
	ref     engine.EntryRef // the key's entry, local rules
	status  int
	end     ending
	settled bool
}

// ending is how a settled request ended (settlement.Ending).
type ending = settlement.Ending

const (
	finished   = settlement.Finished
	cut        = settlement.Cut
	unanswered = settlement.Unanswered
)

// newSettleWriter takes a pooled settle writer for a request.
func newSettleWriter(w http.ResponseWriter, r *http.Request, rule *Rule, lim *limiter, eng Engine, key []byte, cost int64, ref engine.EntryRef) *settleWriter {
	sw := settleWriters.Get().(*settleWriter)
	sw.ResponseWriterWrapper.ResponseWriter = w
	sw.req, sw.rule, sw.lim, sw.eng, sw.key, sw.cost, sw.ref = r, rule, lim, eng, append(sw.key[:0], key...), cost, ref
	return sw
}

// done settles the request, if its status did not already, as it ended:
// returned false means the handlers panicked (the proxy's
// http.ErrAbortHandler when the client hangs up mid-stream, or any
// other), which goes on after this. The writer goes back to the pool
// when the handlers returned.
func (w *settleWriter) done(err error, returned bool) {
	if !w.settled {
		switch {
		case w.status == 0 && (!returned || w.req.Context().Err() != nil):
			w.end = unanswered
		case w.status == 0:
			w.status = settlement.ErrorStatus(err) // Caddy answers the error
		case !returned || err != nil:
			w.end = cut
		}
		w.settle()
	}
	if returned {
		w.reset()
		settleWriters.Put(w)
	}
}

// reset drops what the writer holds of its request, keeping its key
// buffer (a long key's is dropped, so the pool holds small writers).
func (w *settleWriter) reset() {
	key := w.key[:0]
	if cap(key) > 256 {
		key = nil
	}
	*w = settleWriter{key: key}
}

// WriteHeader notes the first final status (1xx are informational) and,
// without a response_cost to wait for, settles by it. The proxy's 499
// with the client gone records that the client left before the answer:
// no status of the upstream's.
func (w *settleWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		if code == StatusClientClosed && w.req.Context().Err() != nil {
			w.end = unanswered
		} else {
			w.status = code
		}
		if w.rule.respCost == "" || w.end == unanswered {
			w.settle()
		}
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write notes an implicit 200.
func (w *settleWriter) Write(p []byte) (int, error) {
	if w.status == 0 && w.end == finished {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(p)
}

// settle charges the key by the response: its status, and the response
// cost from its header or trailer (read once the response is done).
func (w *settleWriter) settle() {
	w.settled = true
	settleResponse(w.rule, w.lim, w.eng, w.key, w.ref, w.rule.charge(w.end, w.status, w.cost, w.Header()))
}

// charge is what a response costs beyond what its request spent when
// admitted (negative: a refund), by how it ended: an unanswered request
// keeps what its admission took (the reserve); a cut answer costs what
// was reported so far, else max_cost; a finished one what was reported,
// else the reserve. The status counts (count_status) unless unanswered.
func (r *Rule) charge(end ending, status int, cost int64, h http.Header) int64 {
	if end == unanswered {
		return 0
	}
	if r.respCost != "" {
		unreported := r.Reserve
		if end == cut {
			unreported = r.MaxCost
		}
		cost = r.responseCost(h, unreported)
	}
	return r.settlement(status, cost)
}

// settleResponse charges key the settlement of its response (negative: a
// refund), at the entry its decision found (ref) while that still holds
// it, and counts the charge in the rule's metrics. Small enough to be
// inlined: the usual charge, counted in its shard and not into debt, is
// one call.
func settleResponse(rule *Rule, lim *limiter, eng Engine, key []byte, ref engine.EntryRef, charge int64) {
	if le, ok := eng.(*localEngine); ok && ref.Known() && charge != 0 {
		if debt, counted := le.settleAt(rule, key, ref, lim.now, charge); debt || !counted {
			lim.countedAt(charge, debt, counted, key, ref)
		}
		return
	}
	settleLookup(rule, lim, eng, key, ref, charge)
}

// settleLookup is settleResponse without the key's entry (a cluster rule,
// or a decision that found none).
func settleLookup(rule *Rule, lim *limiter, eng Engine, key []byte, ref engine.EntryRef, charge int64) {
	if charge == 0 {
		return
	}
	if applied, debt := settle(eng, rule, key, lim.now(), charge); applied {
		lim.counted(charge, debt, key, engine.StripeOf(key, ref))
	}
}

// countedAt counts what a settlement at key's entry took into debt, and
// the charge itself when its shard did not count it.
func (l *limiter) countedAt(charge int64, debt, counted bool, key []byte, ref engine.EntryRef) {
	if !counted {
		l.counted(charge, debt, key, engine.StripeOf(key, ref))
	} else if debt {
		l.enteredDebt(key)
	}
}

// responseCost reads a response's cost from the response_cost header and
// the trailer of that name, up to max_cost (settlement.ResponseCost).
func (r *Rule) responseCost(h http.Header, unreported int64) int64 {
	return settlement.ResponseCost(h, r.respCost, r.respTrailer, unreported, r.MaxCost)
}

// settlement is what a response of status costs beyond what its request
// spent when admitted (negative: a refund).
func (r *Rule) settlement(status int, cost int64) int64 {
	if r.countsAll || r.CountStatus.Has(status) {
		return cost - r.Reserve
	}
	return -r.Reserve
}

// settle charges n tokens (refunds -n) to key through the engine's
// concrete type, so the key's buffer stays on the stack. applied is false
// when the charge was lost (Redis did not take it in time); debt is true
// when this charge took the key below zero (into debt) from zero or above.
func settle(eng Engine, r *Rule, key []byte, now, n int64) (applied, debt bool) {
	switch e := eng.(type) {
	case *localEngine:
		return true, e.settle(r, key, now, n)
	case *clusterEngine:
		return e.settle(r, key, now, n)
	}
	return false, false
}
