package cluster

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/ratelimit/nested"
)

// nestedKeyMargin keeps a node's hash past the time its state would read
// as new anyway (a full bucket, a window over), as calendar keys are.
const nestedKeyMargin = 10 * time.Minute

// NestedRedisKey names one node's hash in a nested quota's tree:
//
//	<prefix>ratelimit:nq:{<root rule-id>:<root key>}:<rule-id>:<key>
//
// The hash tag is the tree's root, so every node under one root key
// shares a Redis Cluster slot and one script names the whole path.
func NestedRedisKey(prefix, rootID string, rootKey []byte, id string, key []byte) string {
	b := make([]byte, 0, len(prefix)+len("ratelimit:nq:{:}::")+len(rootID)+len(rootKey)+len(id)+len(key))
	b = append(b, prefix...)
	b = append(b, "ratelimit:nq:{"...)
	b = append(b, rootID...)
	b = append(b, ':')
	b = append(b, rootKey...)
	b = append(b, "}:"...)
	b = append(b, id...)
	b = append(b, ':')
	b = append(b, key...)
	return string(b)
}

// NestedArgs are the script's arguments for a spend of n along path (the
// leaf first; the nodes' states are not read: they are in Redis) at now
// (Unix ns; 0: Redis's clock), with calendar windows found at wall (the
// instance's clock: Redis has no time zones).
func NestedArgs(path []nested.Node, n float64, now, wall int64) []any {
	var share [nested.MaxDepth]nested.Limit
	var backed [nested.MaxDepth]bool
	nested.Shares(path, &share, &backed)
	ttl := nestedTTL(path)
	args := make([]any, 0, 3+nestedLevelArgs*len(path))
	args = append(args, fmtFloat(n), "", len(path))
	if now != 0 {
		args[1] = strconv.FormatInt(now, 10)
	}
	for i := range path {
		l, sh := path[i].Limit, &share[i]
		kind, ws, we, ms := "0", "0", "0", ttl
		if l.Calendar != nil {
			w := l.Calendar.Window(wall)
			kind, ws, we = "1", strconv.FormatInt(w.Start, 10), strconv.FormatInt(w.End, 10)
			ms = max(ms, (w.End-wall+int64(nestedKeyMargin))/1e6)
		}
		args = append(args, kind, fmtFloat(l.QPS), fmtFloat(l.Burst), fmtFloat(l.Quota), fmtFloat(path[i].Guarantee),
			fmtFloat(sh.QPS), fmtFloat(sh.Burst), fmtFloat(sh.Quota), boolArg(backed[i]), ws, we, ms)
	}
	return args
}

// nestedTTL is the ms after which every bucket on the path has refilled
// from its deepest debt (the design's bound: the depth times its burst),
// plus the margin, and at most maxNestedTTL.
func nestedTTL(path []nested.Node) int64 {
	var secs float64
	for i := range path {
		if l := path[i].Limit; l.Calendar == nil && l.QPS > 0 {
			secs = max(secs, float64(len(path)+1)*l.Burst/l.QPS)
		}
	}
	return int64(math.Ceil(min(secs*1e3, maxNestedTTL))) + nestedKeyMargin.Milliseconds()
}

// maxNestedTTL (ms, ten years) keeps a slow bucket's expiry a number
// Redis takes: far below int64, and past any refill that matters.
const maxNestedTTL = 10 * 365 * 24 * 3600 * 1e3

// NestedSpend runs nested.Spend's decision in Redis over keys (one hash
// per level of path, NestedRedisKey, the leaf first) in one round trip at
// now (0: Redis's clock), and fills out as nested.Spend does. It calls
// Redis directly; a request's spend rides the batcher (SpendNested).
func NestedSpend(ctx context.Context, c redis.Scripter, keys []string, path []nested.Node, n float64, now int64, out *nested.Outcome) (bool, error) {
	wall := now
	if wall == 0 {
		wall = time.Now().UnixNano()
	}
	res, err := NestedScript.Run(ctx, c, keys, NestedArgs(path, n, now, wall)...).Slice()
	if err != nil {
		return false, err
	}
	return ParseNested(res, len(path), out)
}

// ParseNested reads the script's answer for a path of depth levels.
func ParseNested(res []any, depth int, out *nested.Outcome) (bool, error) {
	if len(res) != 3+7*depth {
		return false, fmt.Errorf("nested script: %d values for %d levels", len(res), depth)
	}
	*out = nested.Outcome{Depth: depth, Refused: int(toInt64(res[1]))}
	w, err := strconv.ParseFloat(asString(res[2]), 64)
	if err != nil {
		return false, err
	}
	if out.Refused >= 0 {
		out.Wait = math.MaxInt64
		if w < math.MaxInt64 {
			out.Wait = int64(w)
		}
	}
	for i := 0; i < depth; i++ {
		var f [7]float64
		for j := range f {
			if f[j], err = strconv.ParseFloat(asString(res[3+7*i+j]), 64); err != nil {
				return false, err
			}
		}
		out.Levels[i] = nested.Level{Guaranteed: f[0], Borrowed: f[1], Used: f[2], Ceiling: f[3],
			Remaining: f[4], GuaranteeLeft: f[5], GuaranteedUsed: f[6]}
	}
	return out.Refused < 0, nil
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

func toInt64(v any) int64 {
	i, _ := v.(int64)
	return i
}

// answerNested answers a call of RunNested, unless it timed out already.
func (c *scriptCall) answerNested(res []any, err error) {
	if c.state.CompareAndSwap(callWaiting, callAnswered) {
		c.nres, c.err = res, err
		c.done <- struct{}{}
	}
}

// RunNested runs nestedLua on keys with args through the batcher, one
// script call of its own in the next pipeline, and waits for its answer
// at most timeout, as RunMulti does.
func (b *Batcher) RunNested(keys []string, args []any, timeout time.Duration) ([]any, error) {
	c := callPool.Get().(*scriptCall)
	c.script, c.nested = NestedScript, true
	if !b.runOwn(c, keys, args, timeout) {
		return nil, c.err
	}
	res, err := c.nres, c.err
	putOwn(c)
	return res, err
}

// SpendNested decides a spend of n along path for leaf rule r (keys: one
// hash per level, NestedRedisKey, the leaf first) in Redis, in the next
// batch of the host's client, within r's redis_timeout: token buckets by
// Redis's clock, calendar windows by wall (Unix ns). An error (no Redis,
// Redis marked down, or the call failed, which marks an unreachable
// Redis down) leaves the request to Fail, r's on_redis_error.
func (e *Engine) SpendNested(r *Rule, keys []string, path []nested.Node, n float64, wall int64, out *nested.Outcome) (bool, error) {
	ref := e.host.Backend()
	if ref == nil || ref.B.Client() == nil {
		return false, errNoRedis
	}
	g := ref.B.ClientState(GateKey, NewGate).(*Gate)
	if g.Down.Load() {
		return false, ErrGateDown
	}
	res, err := g.Batch.RunNested(keys, NestedArgs(path, n, 0, wall), r.RedisTimeout)
	if err == nil {
		var ok bool
		if ok, err = ParseNested(res, len(path), out); err == nil {
			e.counters.RedisCalls.Inc()
			return ok, nil
		}
	}
	e.counters.RedisErrors.Inc()
	if Unreachable(err) {
		g.Fail(err, keys[0], ref.Logger)
	} else if e.warned.CompareAndSwap(false, true) && ref.Logger != nil {
		ref.Logger.Warn("cluster rate limit: redis refused the nested quota's script; this decision follows on_redis_error",
			zap.String("rule", r.ID), zap.Error(err))
	}
	return false, err
}
