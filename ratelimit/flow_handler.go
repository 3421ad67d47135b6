package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/flow"
	"github.com/sluicegw/sluice/ratelimit/settlement"
)

// StatusClientClosed is the status logged for a paced request whose client
// went away while it waited (nginx's 499); nothing reaches the client.
const StatusClientClosed = settlement.StatusClientClosed

// zeroWait is {http.ratelimit.queue_wait} of a paced request that did not
// wait, boxed once so setting it does not allocate.
var zeroWait any = time.Duration(0)

// waitTurn waits d.Wait for the request's slot, or until ctx ends; it
// returns the time waited. The request leaves the rule's queue either way.
func waitTurn(ctx context.Context, d *Decision, lim *limiter) (int64, error) {
	defer d.Queued.Add(-1)
	start := lim.now()
	err := flow.SleepUntil(ctx, engine.Now()+d.Wait, lim.flow.sleepers)
	waited := lim.now() - start
	lim.flow.queueWait.Observe(float64(waited) / 1e9)
	return waited, err
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
