package ratelimit

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// serve serves a request its rules admitted: it waits for a paced rule's
// slot (ending early when the client goes), then calls the next handler
// through each settling rule's settle writer and, under an adaptive limit,
// a recorder of the upstream's status and latency. However the request
// ends (answered, failed, panicked, the client gone, or gone while it
// waited), finish then settles each settling rule, gives the adaptive
// slot back and frees the in-flight slots: the one place that does.
func serve(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, ts []taken, kb []byte, repl *caddy.Replacer) (err error) {
	up := upstream{latency: -1}
	returned := false
	defer func() { finish(ts, err, returned, &up) }()
	if err = waitTurns(r, ts, repl); err != nil {
		return err
	}
	wr, rq := w, r
	for i := range ts {
		t := &ts[i]
		if !t.admitted {
			continue
		}
		if t.m.rule.Settles {
			t.sw = newSettleWriter(wr, r, t.m.rule, t.m.lim, t.eng, t.key(kb), t.cost, engine.RefOf(&t.d))
			wr = t.sw
		}
		if t.d.Adaptive != nil {
			wr, rq = up.watch(wr, rq, t.m.lim)
		}
	}
	err = next.ServeHTTP(wr, rq)
	returned = true
	up.measure(r, err)
	return err
}

// finish ends a request its rules admitted, however it ended (returned
// false: the handlers panicked, or err: the client left while it waited
// for its paced slot): each settle writer settles its rule, if the
// response's status did not already (settleWriter.done; the last wraps the
// others and settles first), an adaptive slot goes back with what up
// measured, and the in-flight slots are freed.
func finish(ts []taken, err error, returned bool, up *upstream) {
	for i := len(ts) - 1; i >= 0; i-- {
		if sw := ts[i].sw; sw != nil {
			ts[i].sw = nil
			sw.done(err, returned)
		}
	}
	for i := range ts {
		t := &ts[i]
		if !t.admitted {
			continue
		}
		if a := t.d.Adaptive; a != nil {
			a.Release(t.d.Ticket, up.latency, up.drop, t.m.lim.now())
		}
		t.release()
	}
}

// waitTurns waits for the slot of each paced rule that admitted the
// request (d.Wait), noting the time waited in {http.ratelimit.queue_wait}.
// err: the client went away while it waited.
func waitTurns(r *http.Request, ts []taken, repl *caddy.Replacer) error {
	for i := range ts {
		t := &ts[i]
		if !t.admitted || t.d.Wait <= 0 {
			continue
		}
		waited, err := waitTurn(r.Context(), &t.d, t.m.lim)
		if repl != nil {
			repl.Set("http.ratelimit.queue_wait", time.Duration(waited))
		}
		if err != nil {
			return caddyhttp.Error(StatusClientClosed, err)
		}
	}
	return nil
}

// upstream is what the adaptive limit learns of a request holding one of
// its slots: the upstream's latency (upstreamTimer; from admission to the
// return of next when no HTTP client carried the request), -1 when the
// client left (its latency says nothing of the upstream) or the handlers
// panicked, and whether the upstream failed (isDrop).
type upstream struct {
	lim      *limiter
	timer    *upstreamTimer
	rec      *statusRecorder
	admitted int64
	latency  int64
	drop     bool
}

// watch returns w and r wrapped to time the upstream and note its status.
func (u *upstream) watch(w http.ResponseWriter, r *http.Request, lim *limiter) (http.ResponseWriter, *http.Request) {
	u.lim, u.admitted = lim, lim.now()
	u.timer = &upstreamTimer{now: lim.now}
	u.rec = &statusRecorder{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	return u.rec, r.WithContext(u.timer.trace(r.Context()))
}

// measure notes the upstream's latency and failure once next returned err.
func (u *upstream) measure(r *http.Request, err error) {
	if u.rec == nil || r.Context().Err() != nil {
		return
	}
	start, end := u.timer.span(u.admitted, u.lim.now())
	u.latency, u.drop = end-start, isDrop(err, u.rec.status)
}
