package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// StatusClientClosed is the status logged for a paced request whose client
// went away while it waited (nginx's 499); nothing reaches the client.
const StatusClientClosed = 499

// zeroWait is {http.ratelimit.queue_wait} of a paced request that did not
// wait, boxed once so setting it does not allocate.
var zeroWait any = time.Duration(0)

// serveShaped serves a request that must wait for its slot or feeds the
// adaptive limit (the request path that allocates: a timer, a status
// recorder): it waits for the request's slot (a timer, then nanosleep for
// the last 2 ms; no lock held, ending early when the client goes), then
// serves it holding its in-flight slots, and feeds the adaptive limit the
// upstream's latency (upstreamTimer; from admission to the return of next
// when no HTTP client carried the request).
func serveShaped(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, rule *Rule, lim *limiter, eng Engine, d Decision, repl *caddy.Replacer) error {
	defer eng.Release(&d)
	if d.Wait > 0 {
		waited, err := waitTurn(r.Context(), &d, lim)
		if repl != nil {
			repl.Set("http.ratelimit.queue_wait", time.Duration(waited))
		}
		if err != nil {
			return caddyhttp.Error(StatusClientClosed, err)
		}
	}
	if d.adaptive == nil {
		return next.ServeHTTP(w, r)
	}
	admitted := lim.now()
	timer := &upstreamTimer{now: lim.now}
	rec := &statusRecorder{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	err := next.ServeHTTP(rec, r.WithContext(timer.trace(r.Context())))
	if r.Context().Err() == nil { // a client cancel says nothing of the upstream
		start, end := timer.span(admitted, lim.now())
		d.adaptive.observe(start, end, d.admittedAt, isDrop(err, rec.status))
	}
	return err
}

// waitTurn waits d.Wait for the request's slot, or until ctx ends; it
// returns the time waited. The request leaves the rule's queue either way.
func waitTurn(ctx context.Context, d *Decision, lim *limiter) (int64, error) {
	defer d.queued.Add(-1)
	start := lim.now()
	err := sleepUntil(ctx, monotonicNow()+d.Wait, lim.flow.sleepers)
	waited := lim.now() - start
	lim.flow.queueWait.Observe(float64(waited) / 1e9)
	return waited, err
}

// waitFirstRound lets a request refused by a fresh adaptive limit before
// its first step wait for that step (adaptive_firstround.go), for at most
// one sample window or until its client goes. ok false: it may not wait
// (no room, or the step was taken meanwhile) and stays refused.
func waitFirstRound(ctx context.Context, g *gradient, lim *limiter) (waited int64, ok bool, err error) {
	step, wait, ok := g.firstRoundWait()
	if !ok {
		return 0, false, nil
	}
	defer g.doneWaiting()
	start := lim.now()
	t := time.NewTimer(time.Duration(wait))
	defer t.Stop()
	select {
	case <-step:
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return lim.now() - start, true, err
}

// statusRecorder notes the status the next handler wrote, so a 5xx counts
// as a drop for the adaptive limit.
type statusRecorder struct {
	*caddyhttp.ResponseWriterWrapper
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriterWrapper.WriteHeader(code)
}

// isDrop reports whether a request's outcome says the upstream is
// overloaded or failing: a 5xx, or an error that is not a client error.
func isDrop(err error, status int) bool {
	if err != nil {
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode > 0 && he.StatusCode < 500 {
			return false
		}
		return true
	}
	return status >= 500
}
