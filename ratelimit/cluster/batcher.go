package cluster

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// Batcher coalesces the exact cluster decisions waiting on one Redis client
// at the same moment into one pipelined round trip. The token bucket and
// sliding window decisions in it share one script call per engine (on a
// Redis Cluster, per engine and hash slot) over all their keys, so every
// decision is still answered from Redis's own counters, atomically, for the
// price of one command on Redis's single thread; other scripts (pace, warm
// up) go one call per decision in the same pipeline. On a Redis Cluster,
// go-redis splits the pipeline by node into one round trip per node, run in
// parallel.
//
// It keeps no goroutine while idle. The first decision that finds nobody
// collecting starts a flusher; the flusher waits up to window (by default
// one scheduler yield) for more, takes up to maxBatch pending decisions and
// sends them. While its batch is in flight new decisions pile up and leave
// together in the next one, so under load a batch holds what arrived
// during one round trip, and a lone decision leaves at once. A second
// batch goes out while one is in flight (at most maxInFlight) only once
// maxBatch decisions wait: every batch sent costs a write and a read on
// both sides and Redis's dispatch of a script call, and on a machine
// whose cores Caddy and Redis share, fewer, fuller batches leave more CPU
// for the requests (docs/performance.md has the measurements).
//
// Each decision keeps its own redis_timeout, counted from when it was
// submitted: it stops waiting at its deadline whatever its batch does, and
// a flusher skips decisions already given up. One timer per batcher keeps
// the deadlines (batcher_deadline.go), not one per decision.
type Batcher struct {
	client      redis.UniversalClient
	window      time.Duration
	maxBatch    int
	maxInFlight int

	mu         sync.Mutex
	pending    []*scriptCall
	flying     [][]*scriptCall // the batches in flight
	flushers   int             // goroutines sending batches
	collecting bool            // one of them has not taken its batch yet
	watch      *time.Timer     // fires at watchAt to time out decisions
	watchAt    time.Time       // zero: not armed

	roundTrips atomic.Int64 // pipelines sent (for tests and benchmarks)
	decisions  atomic.Int64 // decisions sent in them
	scripts    atomic.Int64 // script calls carrying those decisions
}

// Batching defaults. No timed window: a short sleep oversleeps to about a
// millisecond on a busy machine, which made a lone decision slower. The
// flusher yields once instead, and under load batches form by themselves
// while one is in flight. Batches stay small enough that one is a few
// hundred µs of Redis time. A second batch in flight, once one is full,
// keeps Redis busy at rates a batch per round trip cannot carry (one batch
// executes while the next travels); more would only hold more pooled
// connections (the faults suite caught 4 growing the pool past its
// baseline).
const (
	defaultBatchWindow = 0
	defaultMaxBatch    = 128
	defaultMaxInFlight = 2
)

func NewBatcher(c redis.UniversalClient) *Batcher {
	return &Batcher{client: c, window: defaultBatchWindow, maxBatch: defaultMaxBatch, maxInFlight: defaultMaxInFlight}
}

// scriptCall is one decision's script run, pooled with its done channel.
// A call timed out is not reused (its flusher may still read it).
type scriptCall struct {
	script *redis.Script
	many   bool // script takes many keys, 4 args each (redisscript.go)
	keys   [1]string
	args   [4]any
	nargs  int // how many of args the script takes
	// multi: a decision under several rules (runMulti), whose keys and
	// args these are instead, answered in mres.
	multi bool
	mkeys []string
	margs []any
	mres  []Grant
	// nested: a spend along a nested quota's path (RunNested), on mkeys
	// and margs too, answered in nres.
	nested   bool
	nres     []any
	deadline time.Time
	state    atomic.Int32 // callWaiting until answered or timed out
	done     chan struct{}
	res      Grant
	err      error
}

// A call's states: it is finished once, by its batch or by its deadline.
const (
	callWaiting int32 = iota
	callAnswered
	callTimedOut
)

// answer gives the call its batch's outcome and wakes its caller, unless
// it timed out already (while its batch was in flight).
func (c *scriptCall) answer(res Grant, err error) { c.finish(res, err, callAnswered) }

// timeOut gives up the call at its deadline, unless it was answered.
func (c *scriptCall) timeOut() { c.finish(Grant{}, ErrRedisTimeout, callTimedOut) }

// finish: the call is finished once, by whichever of the two comes first.
func (c *scriptCall) finish(res Grant, err error, as int32) {
	if c.state.CompareAndSwap(callWaiting, as) {
		c.res, c.err = res, err
		c.done <- struct{}{}
	}
}

// answerMulti answers a call of runMulti, unless it timed out already.
func (c *scriptCall) answerMulti(res []Grant, err error) {
	if c.state.CompareAndSwap(callWaiting, callAnswered) {
		c.mres, c.err = res, err
		c.done <- struct{}{}
	}
}

// callKeys and callArgs are what the script call of a call that is not
// grouped with others names.
func (c *scriptCall) callKeys() []string {
	if c.multi || c.nested {
		return c.mkeys
	}
	return c.keys[:]
}

func (c *scriptCall) callArgs() []any {
	if c.multi || c.nested {
		return c.margs
	}
	return c.args[:c.nargs]
}

var callPool = sync.Pool{New: func() any { return &scriptCall{done: make(chan struct{}, 1)} }}

// ErrRedisTimeout: the decision's redis_timeout passed before its batch
// was answered.
var ErrRedisTimeout = fmt.Errorf("redis_timeout: %w", context.DeadlineExceeded)

// Run runs the engine's script for one key through the batcher and waits
// for its answer at most timeout.
func (b *Batcher) Run(typ engine.LimitType, key string, l *engine.Limits, min, max int64, timeout time.Duration) (Grant, error) {
	script := tokenBucketScript
	if typ == engine.SlidingWindow {
		script = slidingWindowScript
	}
	return b.RunScript(script, true, key, [4]any{l.ScriptArgs[0], l.ScriptArgs[1], min, max}, timeout)
}

// RunPace reserves a paced request's slot (paceLua) through the batcher:
// interval and maxWait in µs.
func (b *Batcher) RunPace(key string, interval float64, maxWait int64, timeout time.Duration) (Grant, error) {
	return b.RunScript(paceScript, false, key, [4]any{interval, maxWait}, timeout)
}

// RunWarm takes a warm-up slot (warmLua) through the batcher: stable and
// tolerance in µs, period in µs.
func (b *Batcher) RunWarm(key string, stable, coldFactor float64, period, tolerance int64, timeout time.Duration) (Grant, error) {
	return b.RunScript(warmScript, false, key, [4]any{stable, coldFactor, period, tolerance}, timeout)
}

// RunScript runs script on key with args (a trailing nil ends them); many:
// the script decides many keys in one call (redisscript.go).
func (b *Batcher) RunScript(script *redis.Script, many bool, key string, args [4]any, timeout time.Duration) (Grant, error) {
	c := callPool.Get().(*scriptCall)
	c.script, c.many = script, many
	c.keys[0] = key
	c.args = args
	c.nargs = 4
	for c.nargs > 0 && args[c.nargs-1] == nil {
		c.nargs--
	}
	b.submit(c, time.Now().Add(timeout))
	<-c.done
	g, err := c.res, c.err
	if c.state.Load() == callTimedOut {
		return g, err // not reused: its flusher may still read it
	}
	c.res, c.err, c.keys[0], c.args = Grant{}, nil, "", [4]any{}
	callPool.Put(c) // answered: the deadline watch leaves it alone until submitted again
	return g, err
}

// RunMulti runs multiLua on keys with args (five per key) through the
// batcher, one script call of its own in the next pipeline, and waits for
// its answer at most timeout. keys and args are the script's until it is
// answered: a flusher may still read them after a timeout.
func (b *Batcher) RunMulti(keys []string, args []any, timeout time.Duration) ([]Grant, error) {
	c := callPool.Get().(*scriptCall)
	c.script, c.multi = multiScript, true
	if !b.runOwn(c, keys, args, timeout) {
		return nil, c.err
	}
	gs, err := c.mres, c.err
	putOwn(c)
	return gs, err
}

// runOwn runs c (its script and kind set) on keys with args as a script
// call of its own and waits for its answer at most timeout. It reports
// whether c was answered: one that timed out is not reused, since its
// flusher may still read it.
func (b *Batcher) runOwn(c *scriptCall, keys []string, args []any, timeout time.Duration) (answered bool) {
	c.many, c.mkeys, c.margs = false, keys, args
	b.submit(c, time.Now().Add(timeout))
	<-c.done
	return c.state.Load() != callTimedOut
}

// putOwn clears an answered call of runOwn and pools it.
func putOwn(c *scriptCall) {
	c.multi, c.nested, c.mkeys, c.margs, c.mres, c.nres, c.err = false, false, nil, nil, nil, nil, nil
	callPool.Put(c)
}

// submit queues c to be decided by deadline. The deadline and the waiting
// state are set under b.mu, where the deadline watch reads them: a pooled
// call may still sit in a batch the watch looks at.
func (b *Batcher) submit(c *scriptCall, deadline time.Time) {
	b.mu.Lock()
	c.deadline = deadline
	c.state.Store(callWaiting)
	b.pending = append(b.pending, c)
	b.watchLocked(deadline)
	// While a batch is in flight the next one fills up and leaves when it
	// returns; a second leaves meanwhile only once a batch is full.
	start := !b.collecting && (b.flushers == 0 || b.flushers < b.maxInFlight && len(b.pending) >= b.maxBatch)
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
func (b *Batcher) flush() {
	if b.window > 0 {
		time.Sleep(b.window) // sleep: the batching window, for the decisions arriving meanwhile
	} else {
		runtime.Gosched() // let the goroutines about to submit do so
	}
	batch := make([]*scriptCall, 0, b.maxBatch)
	live := make([]*scriptCall, 0, b.maxBatch)
	for {
		b.mu.Lock()
		n := min(len(b.pending), b.maxBatch)
		batch = append(batch[:0], b.pending[:n]...)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.collecting = false
		if n > 0 {
			b.flying = append(b.flying, batch)
		}
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
		b.send(batch, live)
		// Let the decisions just answered, and the requests ready to run,
		// go first: under load more decisions join the next batch, which
		// costs Caddy and Redis less CPU per request; with nothing else to
		// run it returns at once.
		runtime.Gosched()
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
// decisions (each one's own deadline is kept by the deadline watch).
// Scripts that Redis no longer has (NOSCRIPT: restart, SCRIPT FLUSH, a new
// node) are sent again in full with EVAL, which also reloads them, as
// Script.Run does. live is room for the decisions still waiting (batch
// itself stays as it is: the deadline watch reads it).
func (b *Batcher) send(batch, live []*scriptCall) {
	live = live[:0]
	var deadline time.Time
	for _, c := range batch {
		if c.state.Load() != callWaiting {
			continue // timed out: its caller took on_redis_error already, spend no token
		}
		live = append(live, c)
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	if len(live) == 0 {
		b.land(batch)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, cluster := b.client.(*redis.ClusterClient)
	groups := groupCalls(live, cluster)
	cmds := make([]*redis.Cmd, len(groups))
	pipe := b.client.Pipeline()
	for i := range groups {
		cmds[i] = groups[i].script.EvalSha(ctx, pipe, groups[i].keys, groups[i].args...)
	}
	pipe.Exec(ctx) // errors are read per command
	b.roundTrips.Add(1)
	b.decisions.Add(int64(len(live)))
	b.scripts.Add(int64(len(groups)))
	var retry []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe := b.client.Pipeline()
		for _, i := range retry {
			cmds[i] = groups[i].script.Eval(ctx, pipe, groups[i].keys, groups[i].args...)
		}
		pipe.Exec(ctx)
		b.roundTrips.Add(1)
	}
	// Out of the deadline watch's sight before any answer: an answered call
	// goes back to the pool, and another batcher may submit it again while
	// this one's watch would still read it.
	b.land(batch)
	for i := range groups {
		g := &groups[i]
		switch c := g.calls[0]; {
		case c.many:
			parseGrants(cmds[i], g.calls)
		case c.multi:
			c.answerMulti(parseMulti(cmds[i], len(c.mkeys)))
		case c.nested:
			c.answerNested(cmds[i].Slice())
		default:
			g.calls[0].answer(parseGrant(cmds[i]))
		}
	}
}

// callGroup is one script call of a batch: several decisions of one many-key
// script (and, on a Redis Cluster, one hash slot), or one other decision.
type callGroup struct {
	script *redis.Script
	calls  []*scriptCall
	keys   []string
	args   []any
}

// groupCalls sorts a batch's decisions into script calls. The decisions of
// a many-key script call are in runs of equal numbers (one rule version),
// in the order they came within each run.
func groupCalls(live []*scriptCall, cluster bool) []callGroup {
	if len(live) == 1 { // a lone decision: no grouping to do
		c := live[0]
		g := callGroup{script: c.script, calls: live, keys: c.callKeys(), args: c.callArgs()}
		if c.many {
			g.args = []any{1, c.args[0], c.args[1], c.args[2], c.args[3]}
		}
		return []callGroup{g}
	}
	groups := make([]callGroup, 0, 4)
	var many int // decisions of many-key scripts
	slots := make([]uint16, len(live))
	for i, c := range live {
		if c.many {
			many++
			if cluster {
				slots[i] = KeySlot(c.keys[0])
			}
		}
	}
	for _, c := range live {
		if !c.many {
			groups = append(groups, callGroup{script: c.script, calls: []*scriptCall{c}, keys: c.callKeys(), args: c.callArgs()})
		}
	}
	// One backing array each for the grouped decisions, keys and runs, so
	// each group's part lies in one piece.
	calls := make([]*scriptCall, 0, many)
	keys := make([]string, 0, many)
	args := make([]any, 0, 5*many)
	done := make([]bool, len(live))
	for i, c := range live {
		if !c.many || done[i] {
			continue
		}
		from, argsFrom := len(calls), len(args)
		// Each run: the first decision not taken yet, and those of the
		// same script, slot and numbers after it.
		for j := i; j < len(live); j++ {
			d := live[j]
			if done[j] || !d.many || d.script != c.script || slots[j] != slots[i] {
				continue
			}
			n := len(calls)
			for k := j; k < len(live); k++ {
				e := live[k]
				if !done[k] && e.many && e.script == c.script && slots[k] == slots[i] && e.args == d.args {
					done[k] = true
					calls = append(calls, e)
					keys = append(keys, e.keys[0])
				}
			}
			args = append(args, len(calls)-n)
			args = append(args, d.args[:]...)
		}
		groups = append(groups, callGroup{script: c.script, calls: calls[from:len(calls):len(calls)],
			keys: keys[from:len(keys):len(keys)], args: args[argsFrom:len(args):len(args)]})
	}
	return groups
}

// Stats are the decisions b sent, the pipelines (round trips) they left
// in and the script calls carrying them, for tests and benchmarks.
func (b *Batcher) Stats() (decisions, roundTrips, scripts int64) {
	return b.decisions.Load(), b.roundTrips.Load(), b.scripts.Load()
}
