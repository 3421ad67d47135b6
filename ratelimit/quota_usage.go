package ratelimit

// GET /sluice/quota/{rule}/{key}: one key's use of its quota right now,
// for an operator answering "why was I limited?". A local rule is read
// from this instance's memory, a cluster rule from Redis. Reading changes
// nothing: no entry is made for an unknown key (it has its whole quota),
// no key's recency moves, no token is spent.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/sluicegw/sluice/ratelimit/cluster"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
)

func init() { rulestore.RegisterView("quota", serveQuota) }

// QuotaUsage is the answer of GET /sluice/quota/{rule}/{key}
// (docs/ratelimit.md, "Usage for a key").
type QuotaUsage struct {
	// Rule is the rate_limit rule's id.
	Rule string `json:"rule"`
	// Key is the key as given (a key longer than 256 bytes: its sha256:
	// form).
	Key string `json:"key"`
	// Scope is the rule's scope: local or cluster.
	Scope string `json:"scope"`
	// Type is the rule's limit_type: token_bucket, sliding_window or
	// calendar.
	Type string `json:"type"`
	// Override: the key has an override, whose numbers these are.
	Override bool `json:"override"`
	// Limit is the quota: burst (token bucket), max per window (sliding
	// window) or quota per period (calendar).
	Limit float64 `json:"limit"`
	// Used is what is spent of Limit now (token bucket: limit − tokens,
	// refill included; sliding window: the weighted estimate the engine
	// decides by; calendar: the count of the current window). It exceeds
	// Limit by Debt after settlements beyond the quota.
	Used float64 `json:"used"`
	// Remaining is the whole units a request could take now.
	Remaining int64 `json:"remaining"`
	// Debt is Used − Limit when above, else 0.
	Debt float64 `json:"debt"`
	// ResetSeconds is the wait until the quota is whole again (token
	// bucket) or the current window ends (sliding window, calendar: the
	// RateLimit header's t).
	ResetSeconds float64 `json:"reset_seconds"`
	// Reset is the instant ResetSeconds ends at.
	Reset time.Time `json:"reset"`
	// Period is a calendar quota's period.
	Period string `json:"period,omitempty"`
	// WindowStart is when a calendar quota's current window began.
	WindowStart *time.Time `json:"window_start,omitempty"`
	// Tracked: state exists for the key (false: never seen, or idle long
	// enough to be forgotten; it holds its whole quota).
	Tracked bool `json:"tracked"`
	// Evicted: the key is not tracked, but was evicted (max_keys) with
	// part of its quota spent, and these figures are what its next request
	// starts from (they may count more than it spent, never less).
	Evicted bool `json:"evicted,omitempty"`
	// Source is where the state was read: memory (scope local) or redis.
	Source string `json:"source"`
	// Clock is whose time the refill or window was computed at: redis
	// (its TIME, as the decision scripts) or local (this instance's).
	Clock string `json:"clock"`
}

// quotaError is the admin API error of status for a quota request.
func quotaError(status int, format string, args ...any) error {
	return &rulestore.ActionError{Status: status, Err: fmt.Errorf(format, args...)}
}

func serveQuota(ctx context.Context, app *rulestore.App, rest string) (any, error) {
	q, err := parseQuotaPath(rest) // quota_key.go
	if err != nil {
		return nil, err
	}
	id := q.id
	rule, lim := quotaRule(app, id)
	if rule == nil {
		return nil, quotaError(http.StatusNotFound, "no rate_limit rule %q on this instance%s", id, rulestore.DidYouMean(id, quotaRuleIDs(app)...))
	}
	if rule.Flow.Behavior != Reject {
		return nil, quotaError(http.StatusBadRequest, "rule %q has control_behavior %s: it shapes requests on a schedule rather than counting a quota; GET /sluice/state shows its queue", id, rule.Flow.Behavior)
	}
	if rule.Nest.Parent != "" {
		return nil, quotaError(http.StatusBadRequest, "rule %q is a level of a nested quota (parent %s): GET /sluice/quota_tree/%s/... shows its use at every level", id, rule.Nest.Parent, id)
	}
	return quotaFor(ctx, app, rule, lim, q)
}

// quotaRule is the rule in force for id on this instance: the store's
// (what the key's next request gets), else an inline rule a handler holds;
// and the rule id's live limiter, nil if no handler uses it here.
func quotaRule(app *rulestore.App, id string) (*Rule, *limiter) {
	var lim *limiter
	limiters.Range(func(lid string, l *limiter) bool {
		if lid == id {
			lim = l
			return false
		}
		return true
	})
	if rr := app.Lookup(rulestore.RateLimit, id); rr != nil {
		if r, ok := rr.Value.(*Rule); ok {
			return r, lim
		}
	}
	if lim == nil {
		return nil, nil
	}
	if s := lim.state.Load(); s != nil {
		return s.rule, lim
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return lim.inline, lim
}

// quotaRuleIDs are the ids a quota can be asked for, for a suggestion.
func quotaRuleIDs(app *rulestore.App) []string {
	var ids []string
	for id := range app.Rules(rulestore.RateLimit) {
		ids = append(ids, id)
	}
	limiters.Range(func(id string, _ *limiter) bool {
		ids = append(ids, id)
		return true
	})
	sort.Strings(ids)
	return ids
}

// limitsFor is the quota key gets under r: its override, or the rule's.
func limitsFor(r *Rule, key string) (*Limits, bool) {
	if o := r.Overrides[key]; o != nil {
		return o, true
	}
	return &r.Limits, false
}

// newQuotaUsage fills in what every answer shares.
func newQuotaUsage(r *Rule, key string) (*QuotaUsage, *Limits) {
	l, over := limitsFor(r, key)
	u := &QuotaUsage{Rule: r.ID, Key: key, Scope: r.Scope, Type: r.Type.String(), Override: over, Limit: l.Max,
		Source: "memory", Clock: "local"}
	if u.Scope == "" {
		u.Scope = "local"
	}
	if r.Type == TokenBucket {
		u.Limit = l.Burst
	}
	if r.Calendar != nil {
		u.Period = r.Calendar.Period.String()
	}
	return u, l
}

// finish sets the numbers from used and the reset wait (ns) at wall.
func (u *QuotaUsage) finish(used float64, reset int64, wall time.Time) {
	if math.IsNaN(used) || math.IsInf(used, 0) {
		used = 0 // never from a state read through script_valid.go; no NaN in an answer
	}
	u.Used = math.Round(used*1000) / 1000
	u.Remaining = int64(math.Floor(min(max(u.Limit-used, 0), u.Limit)))
	u.Debt = math.Round(max(used-u.Limit, 0)*1000) / 1000
	reset = max(reset, 0)
	u.ResetSeconds = math.Round(float64(reset)/1e6) / 1e3
	u.Reset = wall.Add(time.Duration(reset)).UTC().Truncate(time.Millisecond)
}

// setWindow shows a calendar window w.
func (u *QuotaUsage) setWindow(w *engine.Window) {
	s := time.Unix(0, w.Start).UTC()
	u.WindowStart = &s
}

// quotaFromMemory reads key's state in the engine of lim (none: the key
// is untouched). It finds the entry without making one or moving it in
// the LRU, and computes on a copy.
func quotaFromMemory(r *Rule, lim *limiter, key string) *QuotaUsage {
	u, l := newQuotaUsage(r, key)
	now := engine.Now()
	var snap engine.Snapshot
	if lim != nil {
		now = lim.now()
		if s := lim.state.Load(); s != nil {
			// An engine the rule's next request would replace (adopt) holds
			// nothing for it: the key starts afresh there.
			if e, ok := s.engine.(*localEngine); ok && e.Holds(&r.Spec) {
				snap, u.Tracked = e.Peek([]byte(key))
				if !u.Tracked {
					snap, u.Evicted = e.PeekTrace(&r.Spec, []byte(key), now)
				}
			}
		}
	}
	wallNow := time.Now()
	switch r.Type {
	case Calendar:
		wall := engine.Wall(now)
		w := r.Calendar.Window(wall)
		used, _ := snap.Spent(&r.Spec, l, now, w.Start)
		u.setWindow(w)
		u.finish(used, w.End-wall, time.Unix(0, wall))
	default:
		used, reset := snap.Spent(&r.Spec, l, now, 0)
		u.finish(used, reset, wallNow)
	}
	return u
}

// quotaFromRedis reads a cluster rule's state of key from Redis, within the
// rule's redis_timeout: the packed token bucket or sliding window at
// Redis's TIME (as the decision scripts compute it), or a calendar
// window's count, the window picked by this instance's clock (as its
// decisions pick it). Unreachable Redis is 503.
func quotaFromRedis(ctx context.Context, app *rulestore.App, r *Rule, key string) (*QuotaUsage, error) {
	c := app.Client()
	if c == nil {
		return nil, quotaError(http.StatusServiceUnavailable, "rule %q has scope cluster, but no redis is configured: its quota is not counted anywhere", r.ID)
	}
	u, l := newQuotaUsage(r, key)
	u.Source = "redis"
	timeout := r.RedisTimeout
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prefix := app.KeyPrefix()
	if r.Calendar != nil {
		wall := engine.Wall(engine.Now())
		w := r.Calendar.Window(wall)
		rkey := cluster.CalendarRedisKey(prefix, r.ID, []byte(key), w.Start)
		v, err := cluster.ReadCount(ctx, c, rkey)
		if err != nil {
			return nil, redisDown(r, rkey, timeout, err)
		}
		used, perr := strconv.ParseFloat(v, 64)
		u.Tracked = perr == nil
		// A value that is no count, or no valid one, counts as none, as in
		// the script (script_valid.go).
		used = cluster.ValidCount(used, float64(l.Quota))
		if !u.Tracked {
			used = 0
		}
		u.setWindow(w)
		u.finish(used, w.End-wall, time.Unix(0, wall))
		return u, nil
	}
	u.Clock = "redis"
	rkey := cluster.RedisKey(prefix, r.Type, r.ID, []byte(key))
	v, t, err := cluster.ReadState(ctx, c, rkey)
	if err != nil {
		return nil, redisDown(r, rkey, timeout, err)
	}
	now := t.UnixNano() / 1000 * 1000 // µs, as the scripts read TIME
	if r.Type == SlidingWindow {
		var start int64
		var cur, prev float64
		if len(v) == 24 {
			u.Tracked = true
			clock := float64(now / 1000)
			if s, c, p, ok := cluster.ValidWindow(f64le(v[0:]), f64le(v[8:]), f64le(v[16:]), clock, float64(l.Window/1000), l.Max); ok {
				start, cur, prev = int64(s)*1000, c, p
			}
			if start > now-now%l.Window {
				now = start // Redis's clock went back: the script counts at the window's start
			}
		}
		spent, reset := engine.WindowSpent(start, cur, prev, now, l.Window)
		u.finish(spent, reset, t)
		return u, nil
	}
	var last int64
	var tokens float64
	if len(v) == 16 {
		u.Tracked = true
		ls, tk, _ := cluster.ValidTokenBucket(f64le(v[0:]), f64le(v[8:]), float64(now/1000), l.Burst)
		last, tokens = int64(ls)*1000, tk
	}
	spent, full := engine.BucketSpent(last, tokens, now, l.QPS, l.Burst)
	u.finish(spent, full, t)
	return u, nil
}

// f64le reads a little-endian IEEE 754 double (struct.pack '<d').
func f64le(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }

func redisDown(r *Rule, rkey string, timeout time.Duration, err error) error {
	return quotaError(http.StatusServiceUnavailable, "rule %q has scope cluster and its quota lives in redis, which did not answer reading %s within %s: %v", r.ID, rkey, timeout, err)
}
