package ratelimit

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/sluicegw/sluice/ratelimit/overload"
)

// The Caddy side of max_concurrent adaptive (the controller is
// ratelimit/overload): a request takes a slot of the adaptive limit before
// the rest of its rule is decided, waiting in the rule's queue when the
// limit is full, and gives it back with the upstream's latency when it
// ends.

// PriorityHeader names a refused request's priority class in the answer.
const PriorityHeader = "Sluice-Priority"

// classAny are the class names boxed once, for placeholders.
var classAny = func() (a [overload.Classes]any) {
	for i := range a {
		a[i] = overload.Class(i).String()
	}
	return
}()

// priorityOf is the request's class under rule: its fixed priority, or
// its priority placeholder read now (missing or unknown: normal).
func (r *Rule) priorityOf(req *http.Request, repl *caddy.Replacer) overload.Class {
	if r.priorityExpr == "" || repl == nil {
		return demote(req, r.priority)
	}
	c, _ := overload.ParseClass(repl.ReplaceKnown(r.priorityExpr, ""))
	return demote(req, c)
}

// admitAdaptive takes a slot of the adaptive limit c for a request of
// class and key: at once when one is free and nobody waits, else after
// waiting in the queue, at most max_queue_wait. A shadow rule never waits:
// a request that would wait goes on without a slot. The decision holds the
// slot (Allowed) or the queue's refusal (OverAdaptiveLimit). err: the
// client left while it waited.
func admitAdaptive(ctx context.Context, c *overload.Controller, rule *Rule, class overload.Class, key []byte, lim *limiter, repl *caddy.Replacer) (d Decision, err error) {
	d.Class = class
	if t, ok := c.TryAcquire(); ok {
		d.Adaptive, d.Ticket = c, t
		return d, nil
	}
	if rule.Shadow {
		return d, nil
	}
	t, w, out := c.Enqueue(class, key, lim.now())
	if out == overload.Queued {
		start := lim.now()
		timer := lim.flow.timer(time.Duration(rule.Flow.Adaptive.MaxQueueWait))
		select {
		case <-w.Ready():
			t, out = c.Result(w)
		case <-timer.C:
			t, out = c.Abandon(w)
		case <-ctx.Done():
			t, out = c.Abandon(w)
			err = ctx.Err()
		}
		lim.flow.putTimer(timer)
		waited := lim.now() - start
		lim.flow.queueWait.Observe(float64(waited) / 1e9)
		if repl != nil {
			repl.Set("http.ratelimit.queue_wait", time.Duration(waited))
		}
		if err != nil {
			if out == overload.Admitted {
				c.Release(t, -1, false, lim.now())
			}
			return d, err
		}
	}
	if out == overload.Admitted {
		d.Adaptive, d.Ticket = c, t
		return d, nil
	}
	d.Reason, d.Shed = OverAdaptiveLimit, out
	return d, nil
}
