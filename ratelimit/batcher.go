package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher coalesces the exact cluster decisions waiting on one Redis client
// at the same moment into one pipelined round trip: the same script per
// decision (so every decision is still answered from Redis's own counters,
// atomically), sent together. On a Redis Cluster, go-redis splits the
// pipeline by hash slot into one round trip per node, run in parallel.
//
// It keeps no goroutine while idle. The first decision that finds nobody
// collecting starts a flusher; the flusher waits up to window (by default
// one scheduler yield) for more, takes up to maxBatch pending decisions and
// sends them. While batches are in flight (at most maxInFlight) new
// decisions pile up and leave together in the next one, so under load a
// batch holds what arrived during one round trip, and a lone decision
// leaves at once.
//
// Each decision keeps its own redis_timeout, counted from when it was
// submitted: it stops waiting at its deadline whatever its batch does, and
// a flusher skips decisions already given up.
type batcher struct {
	client      redis.UniversalClient
	window      time.Duration
	maxBatch    int
	maxInFlight int

	mu         sync.Mutex
	pending    []*scriptCall
	flushers   int  // goroutines sending batches
	collecting bool // one of them has not taken its batch yet

	roundTrips atomic.Int64 // pipelines sent (for tests and benchmarks)
	decisions  atomic.Int64 // scripts sent in them
}

// Batching defaults. No timed window: a sleep of even 20 µs oversleeps to
// ~1 ms on a busy machine, which made a lone decision 4× slower. The
// flusher yields once instead, and under load batches form by themselves
// while others are in flight. Batches stay small enough that one is a few
// hundred µs of Redis time. Two batches in flight keep a Redis busy (it
// runs one command at a time: one batch executes while the next travels);
// more would only hold more pooled connections (the faults suite caught 4
// growing the pool past its baseline).
const (
	defaultBatchWindow = 0
	defaultMaxBatch    = 128
	defaultMaxInFlight = 2
)

func newBatcher(c redis.UniversalClient) *batcher {
	return &batcher{client: c, window: defaultBatchWindow, maxBatch: defaultMaxBatch, maxInFlight: defaultMaxInFlight}
}

// scriptCall is one decision's script run, pooled with its timer and done
// channel. A call given up at its deadline is not reused (its flusher may
// still write it).
type scriptCall struct {
	script   *redis.Script
	keys     [1]string
	args     [4]any
	nargs    int // how many of args the script takes
	deadline time.Time
	given    atomic.Bool // the caller stopped waiting
	done     chan struct{}
	timer    *time.Timer
	res      grant
	err      error
}

var callPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &scriptCall{done: make(chan struct{}, 1), timer: t}
}}

// errRedisTimeout: the decision's redis_timeout passed before its batch
// was answered.
var errRedisTimeout = fmt.Errorf("redis_timeout: %w", context.DeadlineExceeded)

// run runs the engine's script for one key through the batcher and waits
// for its answer at most timeout.
func (b *batcher) run(typ LimitType, key string, l *Limits, min, max int64, timeout time.Duration) (grant, error) {
	script := tokenBucketScript
	if typ == SlidingWindow {
		script = slidingWindowScript
	}
	return b.runScript(script, key, [4]any{l.scriptArgs[0], l.scriptArgs[1], min, max}, timeout)
}

// runPace reserves a paced request's slot (paceLua) through the batcher:
// interval and maxWait in µs.
func (b *batcher) runPace(key string, interval float64, maxWait int64, timeout time.Duration) (grant, error) {
	return b.runScript(paceScript, key, [4]any{interval, maxWait}, timeout)
}

// runWarm takes a warm-up slot (warmLua) through the batcher: stable and
// tolerance in µs, period in µs.
func (b *batcher) runWarm(key string, stable, coldFactor float64, period, tolerance int64, timeout time.Duration) (grant, error) {
	return b.runScript(warmScript, key, [4]any{stable, coldFactor, period, tolerance}, timeout)
}

// runScript runs script on key with args (a trailing nil ends them).
func (b *batcher) runScript(script *redis.Script, key string, args [4]any, timeout time.Duration) (grant, error) {
	c := callPool.Get().(*scriptCall)
	c.script = script
	c.keys[0] = key
	c.args = args
	c.nargs = 4
	for c.nargs > 0 && args[c.nargs-1] == nil {
		c.nargs--
	}
	c.deadline = time.Now().Add(timeout)
	c.timer.Reset(timeout)
	b.submit(c)
	select {
	case <-c.done:
		c.timer.Stop()
		g, err := c.res, c.err
		c.res, c.err, c.keys[0], c.args = grant{}, nil, "", [4]any{}
		callPool.Put(c)
		return g, err
	case <-c.timer.C:
		c.given.Store(true)
		return grant{}, errRedisTimeout
	}
}

func (b *batcher) submit(c *scriptCall) {
	b.mu.Lock()
	b.pending = append(b.pending, c)
	start := !b.collecting && b.flushers < b.maxInFlight
	if start {
		b.flushers++
		b.collecting = true
	}
	b.mu.Unlock()
	if start {
		go b.flush()
	}
}

// flush sends batches while decisions are pending and no other flusher is
// collecting them; the caller made it the collector.
func (b *batcher) flush() {
	if b.window > 0 {
		time.Sleep(b.window) // sleep: the batching window, for the decisions arriving meanwhile
	} else {
		runtime.Gosched() // let the goroutines about to submit do so
	}
	batch := make([]*scriptCall, 0, b.maxBatch)
	for {
		b.mu.Lock()
		n := min(len(b.pending), b.maxBatch)
		batch = append(batch[:0], b.pending[:n]...)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.collecting = false
		// Another flusher may collect what is left while this one waits
		// on Redis.
		more := rest > 0 && b.flushers < b.maxInFlight
		if more {
			b.flushers++
			b.collecting = true
		}
		b.mu.Unlock()
		if more {
			go b.flush()
		}
		b.send(batch)
		b.mu.Lock()
		if len(b.pending) == 0 || b.collecting {
			b.flushers--
			b.mu.Unlock()
			return
		}
		// What arrived during the round trip leaves now, without a window.
		b.collecting = true
		b.mu.Unlock()
	}
}

// send runs one batch as one pipeline within the latest deadline of its
// decisions (each one's own deadline is kept by its caller). Scripts that
// Redis no longer has (NOSCRIPT: restart, SCRIPT FLUSH, a new node) are
// sent again in full with EVAL, which also reloads them, as Script.Run does.
func (b *batcher) send(batch []*scriptCall) {
	live := batch[:0]
	var deadline time.Time
	for _, c := range batch {
		if c.given.Load() {
			continue // its caller took on_redis_error already: spend no token
		}
		live = append(live, c)
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmds := make([]*redis.Cmd, len(live))
	pipe := b.client.Pipeline()
	for i, c := range live {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys[:], c.args[:c.nargs]...)
	}
	pipe.Exec(ctx) // errors are read per command
	b.roundTrips.Add(1)
	b.decisions.Add(int64(len(live)))
	var retry []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe := b.client.Pipeline()
		for _, i := range retry {
			c := live[i]
			cmds[i] = c.script.Eval(ctx, pipe, c.keys[:], c.args[:c.nargs]...)
		}
		pipe.Exec(ctx)
		b.roundTrips.Add(1)
	}
	for i, c := range live {
		c.res, c.err = parseGrant(cmds[i])
		c.done <- struct{}{}
	}
}
