package redissource

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/sluicegw/sluice/rulestore"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/snapshot"
	"go.uber.org/zap"
)

// sources shares one Redis source per connection settings across config
// generations, so a reload keeps the subscription and loses no update.
var sources = caddy.NewUsagePool()

// redisSource follows the rules kept in Redis. One goroutine (run) owns all
// writes; readers load the current layer atomically.
type redisSource struct {
	poolKey string // its key in sources
	names   keyNames
	resync  time.Duration
	timeout time.Duration
	client  redis.UniversalClient
	logger  *zap.Logger
	snap    atomic.Pointer[rulestore.Layer]
	changes atomic.Uint64 // moved after every store to snap or a slot (App.Changes)

	startOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
	pubsub    atomic.Pointer[redis.PubSub] // the open subscription, closed to stop at once
	// app is the newest started config's app: its static rules are what
	// an overlay from Redis is validated against.
	app atomic.Pointer[rulestore.App]
	// clientStates are handler packages' values tied to this client (see
	// App.ClientState): they go with it.
	clientStates sync.Map

	status   sourceStatus
	feedback feedback // verdicts and history to write back (feedback.go, history.go)

	instanceID    string       // this process's heartbeat member
	instances     atomic.Int64 // live instances sharing this Redis and prefix
	nextHeartbeat time.Time
	declaredBy    *rulestore.App // the config whose declarations the last beat wrote

	// Owned by the run goroutine.
	epoch    string                     // the marker value this store has seen
	retained map[rulestore.RuleRef]bool // rules kept after Redis lost its data
	// fence is set when a data loss is found: the payload of a PING on the
	// subscription (sent once: fencePinged), whose pong comes after every
	// message published before it. Until then a retained rule read absent
	// is kept: the message that named it may predate the loss (lossfence.go).
	fence       string
	fencePinged bool
	streamID    string    // last change-log entry read
	down        bool      // last attempt failed (log transitions once)
	junk        int       // junk messages since the last warning
	junkLogged  time.Time // when junk was last logged
	// refreshed is when each rule was last re-read, for the propagation
	// delay of admin API writes (see observeDelay).
	refreshed map[rulestore.RuleRef]int64
	loaded    bool                // the first full load is done (it emits no per-rule events)
	noGood    []rulestore.RuleRef // rejected with no version held here: read the fleet's last good
	editing   *rulestore.Layer    // the batch's copy of the layer, unpublished (update.go)
	updated   []slotUpdate        // the batch's updates of rules in force, unpublished
	edited    []bool              // by kind: its map in editing is the batch's copy
	queue     refreshQueue        // ids named on the rule channels, to re-read
	disk      diskState           // the local snapshot (diskseed.go)

	// Where and how waitToReconnect probes for Redis coming back.
	probeAddrs []string
	probeTLS   *tls.Config
}

// sourceStatus is what the store reports about its Redis connection.
type sourceStatus struct {
	connected  atomic.Bool
	lastResync atomic.Int64 // unix nanoseconds
	resyncs    atomic.Int64
	updates    atomic.Int64
	rejected   atomic.Int64
}

func init() { rulestore.RegisterRedisSource(acquireSource) }

// acquireSource returns the source for c's settings, shared by every
// config generation with the same ones.
func acquireSource(c rulestore.RedisSourceConfig) (rulestore.RedisSource, error) {
	cfg, prefix, resync, logger := c.Redis, c.Prefix, c.Resync, c.Logger
	opts, tlsDigest, err := cfg.OptionsDigest()
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(struct {
		R      *redisconf.Config
		P      string
		Resync time.Duration
		TLS    string // contents of the TLS files, which may change under the same names
	}{cfg, prefix, resync, tlsDigest})
	key := string(b)
	v, _, err := sources.LoadOrNew(key, func() (caddy.Destructor, error) {
		s := &redisSource{
			poolKey:    key,
			names:      keyNames{prefix: prefix},
			resync:     resync,
			timeout:    opts.ReadTimeout,
			client:     redis.NewUniversalClient(opts), // connects lazily
			logger:     logger.With(zap.Strings("redis", opts.Addrs)),
			retained:   map[rulestore.RuleRef]bool{},
			refreshed:  map[rulestore.RuleRef]int64{},
			queue:      newRefreshQueue(),
			probeAddrs: opts.Addrs,
			probeTLS:   opts.TLSConfig,
		}
		s.disk.path = filepath.Join(caddy.AppDataDir(), "sluice", snapshot.Name(opts.Addrs, opts.DB, opts.MasterName, prefix))
		s.disk.kick = make(chan struct{}, 1)
		s.disk.garbled = map[rulestore.RuleRef]string{}
		var b [8]byte
		rand.Read(b[:])
		s.instanceID = hex.EncodeToString(b[:])
		s.feedback.heartbeat = s.instanceID
		s.instances.Store(1)
		s.snap.Store(rulestore.NewLayer())
		if c.Held != nil { // the running config's rules, until the first load
			s.snap.Store(c.Held.Copy())
		}
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*redisSource), nil
}

func (s *redisSource) snapshot() *rulestore.Layer { return s.snap.Load() }

// start begins following Redis in the background; later calls do nothing.
func (s *redisSource) start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.done = cancel, make(chan struct{})
		go s.run(ctx)
	})
}

// Destruct stops following Redis once no config generation uses it. Its
// own pass through startOnce waits for a start under way (whose cancel and
// done it then reads) and keeps a later start from following Redis again.
func (s *redisSource) Destruct() error {
	s.startOnce.Do(func() {})
	if s.cancel != nil {
		s.cancel()
		if ps := s.pubsub.Load(); ps != nil {
			ps.Close() // unblocks a pending receive, so a reload never waits on it
		}
		<-s.done
		s.leave()
	}
	return s.client.Close()
}

// run keeps a session with Redis open, reconnecting with backoff and
// jitter, cut short when Redis comes back (see waitToReconnect). Every new
// session starts with a full resync, so nothing published while
// disconnected is lost.
func (s *redisSource) run(ctx context.Context) {
	defer close(s.done)
	var writer sync.WaitGroup
	writer.Add(2)
	go func() { defer writer.Done(); s.writeDisk(ctx) }()
	go func() { defer writer.Done(); s.answerPreviews(ctx) }()
	defer writer.Wait()
	backoff := minBackoff
	for ctx.Err() == nil {
		connected, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = minBackoff
		}
		s.serveDiskUntilLoaded() // unreachable at start: the snapshot's rules
		if !s.down {
			s.down = true
			s.status.connected.Store(false)
			s.logger.Warn("redis unavailable: serving the last good rules, retrying in the background",
				zap.Error(err))
		}
		if s.waitToReconnect(ctx, backoff, err) {
			backoff = minBackoff
		} else {
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// session subscribes, then loads everything, then applies changes until the
// connection fails. Subscribing first means no change made during the load
// is missed. connected reports whether the session got that far.
func (s *redisSource) session(ctx context.Context) (connected bool, err error) {
	channels := make([]string, 0, rulestore.NumKinds())
	for _, k := range rulestore.Kinds() {
		channels = append(channels, s.names.Channel(k))
	}
	ps := s.client.Subscribe(ctx, channels...)
	s.pubsub.Store(ps)
	defer ps.Close()
	if err := s.connect(ctx, ps, len(channels)); err != nil {
		return false, err
	}

	// One goroutine receives, so this one can take every message already
	// waiting and re-read the ids they name in one batch (see refresh.go).
	events := make(chan received, eventsBuffer)
	rctx, stopReceiving := context.WithCancel(ctx)
	var receiving sync.WaitGroup
	receiving.Add(1)
	go func() { defer receiving.Done(); receive(rctx, ps, events) }()
	defer func() { stopReceiving(); ps.Close(); receiving.Wait() }()
	// Another writes the feedback (verdicts, history, last good): a
	// bulk change's thousands of scripts must not hold up the next change.
	kickFeedback := make(chan struct{}, 1)
	receiving.Add(1)
	go func() { defer receiving.Done(); s.writeFeedback(rctx, kickFeedback) }()

	tick := time.NewTicker(sessionTick)
	defer tick.Stop()
	now := time.Now()
	ss := &sessionState{ps: ps, channels: len(channels), events: events, kickFeedback: kickFeedback,
		nextResync: now.Add(s.resync), nextPoll: now.Add(streamPollInterval), lastHeard: now, lastFeedback: now}
	for {
		// After a resync that found a data loss (lossfence.go).
		if err := s.sendFence(ctx, ps); err != nil {
			return true, err
		}
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev := <-events:
			if err := s.onEvents(ctx, ss, ev); err != nil {
				return true, err
			}
		case now := <-tick.C:
			if err := s.onTick(ctx, ss, now); err != nil {
				return true, err
			}
		}
	}
}

// connect waits for the subscriptions, beats and loads every rule: the
// start of a session, after which the store follows Redis.
func (s *redisSource) connect(ctx context.Context, ps *redis.PubSub, channels int) error {
	if ctx.Err() != nil { // stopped while subscribing
		return ctx.Err()
	}
	if err := s.awaitSubscriptions(ctx, ps, channels); err != nil {
		return err
	}
	// Beat first: the resync writes verdicts that name this heartbeat,
	// and a verdict whose heartbeat is not current reads as stopped.
	if err := s.heartbeat(ctx, time.Now()); err != nil {
		return err
	}
	s.fence = "" // a new subscription has no message from before it
	if err := s.fullResync(ctx, "connected"); err != nil {
		return err
	}
	if s.down || !s.status.connected.Load() {
		s.logger.Info("redis connected: following rule changes")
	}
	s.down = false
	s.status.connected.Store(true)
	return nil
}

// sessionState is what one session's loop keeps between its steps.
type sessionState struct {
	ps           *redis.PubSub
	channels     int
	events       chan received
	kickFeedback chan struct{}
	nextResync   time.Time
	nextPoll     time.Time
	lastHeard    time.Time
	pingSent     time.Time // zero: no ping unanswered
	lastFeedback time.Time
	lastBulk     time.Time
}

// kick asks the feedback writer for a flush.
func (ss *sessionState) kick(now time.Time) {
	select {
	case ss.kickFeedback <- struct{}{}:
	default: // a flush is already due: it takes everything queued
	}
	ss.lastFeedback = now
}

// onEvents takes ev and the messages waiting behind it, then applies what
// they named.
func (s *redisSource) onEvents(ctx context.Context, ss *sessionState, ev received) error {
	n, err := s.drain(ctx, ev, ss.events, ss.channels)
	ss.lastHeard, ss.pingSent = time.Now(), time.Time{}
	if err != nil {
		return err
	}
	if n >= bulkMessages {
		ss.lastBulk = ss.lastHeard
	}
	if err := s.flushPending(ctx); err != nil {
		return err
	}
	// A lone change gets its verdict at once; a bulk change's
	// feedback waits until its messages stop (see the tick), so
	// its thousands of writes never delay the rules still coming.
	if len(ss.events) == 0 && time.Since(ss.lastBulk) >= sessionTick {
		ss.kick(time.Now())
	}
	return nil
}

// onTick runs the session's periodic work: deferred re-reads, the ping
// that finds a hung Redis, change-log polls and heartbeats, feedback,
// resyncs.
func (s *redisSource) onTick(ctx context.Context, ss *sessionState, now time.Time) error {
	s.saveDisk(now)
	s.queue.due(now)
	if err := s.flushPending(ctx); err != nil {
		return err
	}
	// A hung Redis (SIGSTOP, blackholed) never closes the
	// connection, so check it answers a ping in time.
	if !ss.pingSent.IsZero() && now.Sub(ss.pingSent) > s.timeout+streamPollInterval {
		return errors.New("redis stopped answering pings")
	}
	if ss.pingSent.IsZero() && now.Sub(ss.lastHeard) >= streamPollInterval {
		if err := ss.ps.Ping(ctx); err != nil {
			return err
		}
		ss.pingSent = now
	}
	if now.After(ss.nextPoll) {
		if err := s.pollStream(ctx); err != nil {
			return err
		}
		if err := s.heartbeat(ctx, now); err != nil {
			return err
		}
		ss.nextPoll = now.Add(streamPollInterval)
	}
	if now.Sub(ss.lastHeard) >= sessionTick || now.Sub(ss.lastFeedback) >= feedbackMaxDelay {
		ss.kick(now)
	}
	if now.After(ss.nextResync) {
		if err := s.fullResync(ctx, "periodic"); err != nil {
			return err
		}
		ss.nextResync = now.Add(s.resync)
	}
	return nil
}

// sessionTick paces the session's periodic work: deferred re-reads,
// pings, change-log polls, resyncs.
const sessionTick = 50 * time.Millisecond

// Bulk changes: every rule channel message is one id, and a deploy may
// publish ten thousand at once. The session takes them in batches: each
// batch costs one copy of the held kind's map (O(rules held)) and a
// pipelined read per refreshBatch ids, so larger batches make a bulk
// change cost O(changed rules), not O(changed × held / batch).
const (
	eventsBuffer = 16384 // messages the receiver may run ahead
	// bulkMessages taken in one drain mark a bulk change in progress:
	// the drain then waits up to coalesceGap for more, and feedback is
	// deferred until the messages stop.
	bulkMessages = 256
	coalesceGap  = 2 * time.Millisecond
	coalesceMax  = 50 * time.Millisecond // longest a batch is collected
	// feedbackMaxDelay bounds how long verdicts and history wait under
	// unceasing changes.
	feedbackMaxDelay = time.Second
)

// drain handles ev and every message already waiting, up to drainLimit
// or for coalesceMax (so the first rules of a long bulk change go in force
// while the rest still arrive); once a bulk change shows (bulkMessages
// taken), it also waits up to coalesceGap for the next message, so the ids
// of a bulk change are re-read in a few large batches. It returns how many
// messages it took.
func (s *redisSource) drain(ctx context.Context, ev received, events <-chan received, channels int) (int, error) {
	var gap *time.Timer
	stopWaiting := time.Now().Add(coalesceMax)
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for n := 1; ; n++ {
		if ev.err != nil {
			return n, ev.err
		}
		if err := s.onReceived(ctx, ev.msg, channels); err != nil {
			return n, err
		}
		if n >= drainLimit || time.Now().After(stopWaiting) {
			return n, nil
		}
		select {
		case ev = <-events:
			continue
		default:
		}
		if n < bulkMessages {
			return n, nil
		}
		if gap == nil {
			gap = time.NewTimer(coalesceGap)
		} else {
			gap.Reset(coalesceGap)
		}
		select {
		case ev = <-events:
		case <-gap.C:
			return n, nil
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// writeFeedback flushes the feedback each time it is kicked, until ctx
// ends; what is still queued then is written by the next session.
func (s *redisSource) writeFeedback(ctx context.Context, kick <-chan struct{}) {
	for {
		select {
		case <-kick:
			s.flushFeedback(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// received is one reply from the subscription, or the error that ended it.
type received struct {
	msg any
	err error
}

// receive passes the subscription's replies on until an error or ctx ends.
func receive(ctx context.Context, ps *redis.PubSub, out chan<- received) {
	for {
		msg, err := ps.Receive(ctx)
		select {
		case out <- received{msg, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// onReceived handles one reply: a message queues its id for re-reading.
func (s *redisSource) onReceived(ctx context.Context, msg any, channels int) error {
	switch m := msg.(type) {
	case *redis.Message:
		s.onMessage(m)
	case *redis.Pong:
		s.onPong(m.Payload)
	case *redis.Subscription:
		// go-redis resubscribed after a reconnect of its own: messages may
		// have been missed in between.
		if m.Kind == "subscribe" && m.Count == channels {
			return s.fullResync(ctx, "resubscribed")
		}
	}
	return nil
}

func (s *redisSource) awaitSubscriptions(ctx context.Context, ps *redis.PubSub, n int) error {
	for confirmed := 0; confirmed < n; {
		msg, err := ps.ReceiveTimeout(ctx, s.timeout)
		if err != nil {
			return err
		}
		if sub, ok := msg.(*redis.Subscription); ok && sub.Kind == "subscribe" {
			confirmed++
		}
	}
	return nil
}

// onMessage takes one published change: the message is the rule id, and
// the store queues that key to be re-read.
func (s *redisSource) onMessage(m *redis.Message) {
	kind, ok := s.names.parseChannel(m.Channel)
	if !ok {
		return
	}
	if err := rulestore.ValidID(m.Payload); err != nil {
		// A flood of junk must not flood the log: one line per 10s, with
		// the number of messages ignored since the last line.
		s.junk++
		if now := time.Now(); now.After(s.junkLogged.Add(10 * time.Second)) {
			s.logger.Warn("ignoring message: not a rule id",
				zap.String("channel", m.Channel), zap.String("payload", clip(m.Payload)),
				zap.Int("ignored_since_last_line", s.junk), zap.String("error", clip(err.Error())))
			s.junk, s.junkLogged = 0, now
		}
		return
	}
	s.queue.add(rulestore.RuleRef{Kind: kind, ID: m.Payload}, time.Now())
}
