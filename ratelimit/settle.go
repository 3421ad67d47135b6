package ratelimit

import (
	"net/http"
	"sync"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/settlement"
)

// Settling (package ratelimit/settlement says how a settling rule charges
// however its request ends): an admitted request of a settling rule is
// served through a settle writer (pipeline_serve.go), which charges its
// key once the settlement.Writer it embeds knows how the response ended.

// settleWriters are the settle writers of finished requests, reused: a
// writer is one allocation per request otherwise. A handler does not use
// its writer after its ServeHTTP returned (net/http requires as much of
// its own), so one writer serves one request at a time. A request that
// panics leaves its writer to the collector.
var settleWriters = sync.Pool{New: func() any { return new(settleWriter) }}

// settleWriter charges its request's key once, by the response.
type settleWriter struct {
	settlement.Writer
	rule *Rule
	lim  *limiter
	eng  Engine
	key  []byte // the request's key, copied into the writer's own buffer
	cost int64
	ref  engine.EntryRef // the key's entry, local rules
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
	sw.Writer.Begin(w, r, rule.respCost == "", sw)
	sw.rule, sw.lim, sw.eng, sw.key, sw.cost, sw.ref = rule, lim, eng, append(sw.key[:0], key...), cost, ref
	return sw
}

// done settles the request, if its status did not already, as it ended
// (settlement.Writer.Done). The writer goes back to the pool when the
// handlers returned.
func (w *settleWriter) done(err error, returned bool) {
	w.Writer.Done(err, returned)
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

// Settle charges the key by the response: its status, and the response
// cost from its header or trailer (read once the response is done).
func (w *settleWriter) Settle(sw *settlement.Writer) {
	settleResponse(w.rule, w.lim, w.eng, w.key, w.ref, w.rule.charge(sw.End, sw.Status, w.cost, sw.Header()))
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
