package grayroute

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/sluicegw/sluice/internal/handlerkit"
)

// The request path's part of the canary analysis (see analysis_hub.go):
// a request sent to a canary or its baseline is timed and counted.

// cohortCounts are one version's outcomes since the canary started,
// written by requests with atomic adds.
type cohortCounts struct {
	requests, errors atomic.Uint64
	latency          [NumLatencyBuckets]atomic.Uint64
}

func (c *cohortCounts) snapshot(v *VersionCounts) {
	v.Requests, v.Errors = c.requests.Load(), c.errors.Load()
	for i := range c.latency {
		v.Latency[i] = c.latency[i].Load()
	}
}

// cohort returns the counters a request decided by g is counted in, or nil
// when it is not part of the analysis: analysis off, canary not running, a
// weight of 0 or 100 % (nothing to compare), or a request forced to a
// version rather than split by the hash.
func (h *Handler) cohort(g *Rule, canaryChosen, forced bool) *cohortCounts {
	if g.Analysis == nil || g.State != StateRunning || forced || h.hub == nil ||
		g.Weight == 0 || g.Weight >= Buckets {
		return nil
	}
	c := h.hub.canaryFor(g)
	if canaryChosen {
		return &c.counts[canarySide]
	}
	return &c.counts[baselineSide]
}

// upstreamLatency is reverse_proxy's placeholder for its round trip to the
// upstream: from sending the request to the upstream's response header.
const upstreamLatency = "http.reverse_proxy.upstream.latency"

// serveCounted serves a request of an analysis cohort and counts its
// outcome: a 5xx response, or an error from the proxy (dial, upstream,
// timeout: Caddy's 502/503/504), is an error; a request the client gave up
// on is not counted at all.
//
// Its latency is the upstream's own time where a reverse_proxy below
// answered it (the round trip of its last try, to the response header),
// else the time the handlers below took. The gateway's share (routing,
// copying the body, a busy machine's stalls between these steps) is the
// same for both versions and would only hide the difference between them.
func (h *Handler) serveCounted(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, c *cohortCounts) error {
	sw := h.hub.writers.Get().(*handlerkit.StatusWriter)
	sw.ResponseWriter, sw.Status = w, 0
	start := time.Now()
	err := next.ServeHTTP(sw, r)
	elapsed := time.Since(start)
	status := sw.Status
	sw.ResponseWriter = nil
	h.hub.writers.Put(sw)

	if r.Context().Err() != nil {
		return err // the client went away: says nothing about the version
	}
	if err != nil {
		status = http.StatusInternalServerError
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
		if status == 499 {
			return err
		}
	}
	c.requests.Add(1)
	if status >= 500 {
		c.errors.Add(1)
	}
	c.latency[LatencyBucket(upstreamTime(r, elapsed))].Add(1)
	return err
}

// upstreamTime is the proxy's round trip recorded in r's replacer, or
// elapsed without one. A round trip is part of elapsed; one longer was
// recorded before this handler (a forward_auth ahead of it) and is not
// this request's.
func upstreamTime(r *http.Request, elapsed time.Duration) time.Duration {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return elapsed
	}
	v, _ := repl.Get(upstreamLatency)
	if d, ok := v.(time.Duration); ok && d > 0 && d <= elapsed {
		return d
	}
	return elapsed
}
