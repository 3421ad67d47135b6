package rulestore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// sources shares one Redis source per connection settings across config
// generations, so a reload keeps the subscription and loses no update.
var sources = caddy.NewUsagePool()

// streamPollInterval is how often the change log is read for entries the
// subscription may have missed.
const streamPollInterval = time.Second

// redisSource follows the rules kept in Redis. One goroutine (run) owns all
// writes; readers load the current layer atomically.
type redisSource struct {
	names   keyNames
	resync  time.Duration
	timeout time.Duration
	client  redis.UniversalClient
	logger  *zap.Logger
	snap    atomic.Pointer[layer]

	startOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
	pubsub    atomic.Pointer[redis.PubSub] // the open subscription, closed to stop at once
	// app is the newest started config's app: its static rules are what
	// an overlay from Redis is validated against.
	app atomic.Pointer[App]
	// clientStates are handler packages' values tied to this client (see
	// App.ClientState): they go with it.
	clientStates sync.Map

	status   sourceStatus
	feedback feedback // verdicts and history to write back (status.go, history.go)

	instanceID    string       // this process's heartbeat member
	instances     atomic.Int64 // live instances sharing this Redis and prefix
	nextHeartbeat time.Time

	// Owned by the run goroutine.
	epoch      string           // the marker value this store has seen
	retained   map[ruleRef]bool // rules kept after Redis lost its data
	streamID   string           // last change-log entry read
	down       bool             // last attempt failed (log transitions once)
	junk       int              // junk messages since the last warning
	junkLogged time.Time        // when junk was last logged
	// refreshed is when each rule was last re-read, for the propagation
	// delay of admin API writes (see observeDelay).
	refreshed map[ruleRef]int64
	loaded    bool         // the first full load is done (it emits no per-rule events)
	queue     refreshQueue // ids named on the rule channels, to re-read

	// Where and how waitToReconnect probes for Redis coming back.
	probeAddrs []string
	probeTLS   *tls.Config
}

type ruleRef struct {
	kind Kind
	id   string
}

// sourceStatus is what the store reports about its Redis connection.
type sourceStatus struct {
	connected  atomic.Bool
	lastResync atomic.Int64 // unix nanoseconds
	resyncs    atomic.Int64
	updates    atomic.Int64
	rejected   atomic.Int64
}

func acquireSource(cfg *RedisConfig, prefix string, resync time.Duration, logger *zap.Logger) (*redisSource, string, error) {
	opts, tlsDigest, err := cfg.options()
	if err != nil {
		return nil, "", err
	}
	b, _ := json.Marshal(struct {
		R      *RedisConfig
		P      string
		Resync time.Duration
		TLS    string // contents of the TLS files, which may change under the same names
	}{cfg, prefix, resync, tlsDigest})
	key := string(b)
	v, _, err := sources.LoadOrNew(key, func() (caddy.Destructor, error) {
		s := &redisSource{
			names:      keyNames{prefix: prefix},
			resync:     resync,
			timeout:    opts.ReadTimeout,
			client:     redis.NewUniversalClient(opts), // connects lazily
			logger:     logger.With(zap.Strings("redis", opts.Addrs)),
			retained:   map[ruleRef]bool{},
			refreshed:  map[ruleRef]int64{},
			queue:      newRefreshQueue(),
			probeAddrs: opts.Addrs,
			probeTLS:   opts.TLSConfig,
		}
		var b [8]byte
		rand.Read(b[:])
		s.instanceID = hex.EncodeToString(b[:])
		s.instances.Store(1)
		s.snap.Store(new(layer))
		// A reload that changes the Redis settings gets a new source: until
		// its first load completes, it serves the rules the running one
		// holds, so a Redis-only rule never lapses during the reload.
		if prev := active(); prev != nil && prev.source != nil {
			s.snap.Store(prev.source.snapshot().copy())
		}
		return s, nil
	})
	if err != nil {
		return nil, "", err
	}
	return v.(*redisSource), key, nil
}

func (s *redisSource) snapshot() *layer { return s.snap.Load() }

// start begins following Redis in the background; later calls do nothing.
func (s *redisSource) start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.done = cancel, make(chan struct{})
		go s.run(ctx)
	})
}

// Destruct stops following Redis once no config generation uses it.
func (s *redisSource) Destruct() error {
	if s.cancel != nil {
		s.cancel()
		if ps := s.pubsub.Load(); ps != nil {
			ps.Close() // unblocks a pending receive, so a reload never waits on it
		}
		<-s.done
	}
	return s.client.Close()
}

// run keeps a session with Redis open, reconnecting with backoff and
// jitter, cut short when Redis comes back (see waitToReconnect). Every new
// session starts with a full resync, so nothing published while
// disconnected is lost.
func (s *redisSource) run(ctx context.Context) {
	defer close(s.done)
	backoff := minBackoff
	for ctx.Err() == nil {
		connected, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = minBackoff
		}
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
	channels := make([]string, 0, numKinds)
	for _, k := range Kinds() {
		channels = append(channels, s.names.Channel(k))
	}
	ps := s.client.Subscribe(ctx, channels...)
	s.pubsub.Store(ps)
	defer ps.Close()
	if ctx.Err() != nil { // stopped while subscribing
		return false, ctx.Err()
	}
	if err := s.awaitSubscriptions(ctx, ps, len(channels)); err != nil {
		return false, err
	}
	if err := s.fullResync(ctx, "connected"); err != nil {
		return false, err
	}
	if s.down || !s.status.connected.Load() {
		s.logger.Info("redis connected: following rule changes")
	}
	s.down = false
	s.status.connected.Store(true)

	// One goroutine receives, so this one can take every message already
	// waiting and re-read the ids they name in one batch (see refresh.go).
	events := make(chan received, 1024)
	rctx, stopReceiving := context.WithCancel(ctx)
	var receiving sync.WaitGroup
	receiving.Add(1)
	go func() { defer receiving.Done(); receive(rctx, ps, events) }()
	defer func() { stopReceiving(); ps.Close(); receiving.Wait() }()

	tick := time.NewTicker(sessionTick)
	defer tick.Stop()
	nextResync := time.Now().Add(s.resync)
	nextPoll := time.Now().Add(streamPollInterval)
	lastHeard, pingSent := time.Now(), time.Time{}
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case ev := <-events:
			// Take what is already waiting, up to drainLimit, then re-read.
			for n := 0; ; n++ {
				if ev.err != nil {
					return true, ev.err
				}
				lastHeard, pingSent = time.Now(), time.Time{}
				if err := s.onReceived(ctx, ev.msg, len(channels)); err != nil {
					return true, err
				}
				if n == drainLimit {
					break
				}
				var more bool
				select {
				case ev, more = <-events:
				default:
				}
				if !more {
					break
				}
			}
			if err := s.flushPending(ctx); err != nil {
				return true, err
			}
		case now := <-tick.C:
			s.queue.due(now)
			if err := s.flushPending(ctx); err != nil {
				return true, err
			}
			// A hung Redis (SIGSTOP, blackholed) never closes the
			// connection, so check it answers a ping in time.
			if !pingSent.IsZero() && now.Sub(pingSent) > s.timeout+streamPollInterval {
				return true, errors.New("redis stopped answering pings")
			}
			if pingSent.IsZero() && now.Sub(lastHeard) >= streamPollInterval {
				if err := ps.Ping(ctx); err != nil {
					return true, err
				}
				pingSent = now
			}
			if now.After(nextPoll) {
				if err := s.pollStream(ctx); err != nil {
					return true, err
				}
				if err := s.heartbeat(ctx, now); err != nil {
					return true, err
				}
				nextPoll = now.Add(streamPollInterval)
			}
			if now.After(nextResync) {
				if err := s.fullResync(ctx, "periodic"); err != nil {
					return true, err
				}
				nextResync = now.Add(s.resync)
			}
		}
	}
}

// sessionTick paces the session's periodic work: deferred re-reads,
// pings, change-log polls, resyncs.
const sessionTick = 50 * time.Millisecond

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
	if err := ValidID(m.Payload); err != nil {
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
	s.queue.add(ruleRef{kind, m.Payload}, time.Now())
}

func (s *redisSource) upsert(k Kind, id string, f Fields) {
	cur := s.snap.Load()
	old := cur.get(k, id)
	delete(s.retained, ruleRef{k, id})
	if old != nil && old.Fields.Equal(f) {
		return
	}
	r, ok := s.parse(k, id, f, old)
	if !ok {
		return
	}
	if old != nil {
		cur[k][id].rule.Store(r)
	} else {
		next := cur.clone(k)
		next[k][id] = newSlot(r)
		s.snap.Store(next)
	}
	s.status.updates.Add(1)
	s.logger.Info("rule updated", zap.String("key", s.names.RuleKey(k, id)))
	s.applied(k, id, old, f)
}

func (s *redisSource) remove(k Kind, id string) {
	cur := s.snap.Load()
	delete(s.retained, ruleRef{k, id})
	old := cur.get(k, id)
	if old == nil {
		s.feedback.forget(k, id)
		return
	}
	next := cur.clone(k)
	delete(next[k], id)
	s.snap.Store(next)
	s.status.updates.Add(1)
	s.logger.Info("rule deleted", zap.String("key", s.names.RuleKey(k, id)))
	s.applied(k, id, old, nil)
}

// parse validates a rule read from Redis. A bad rule is logged with its key,
// field and reason, and the last good version (old) stays in force.
func (s *redisSource) parse(k Kind, id string, f Fields, old *Rule) (*Rule, bool) {
	st := s.staticRule(k, id)
	v, _, err := parseOver(k, id, st, f)
	s.feedback.verdict(k, id, f, err)
	if err != nil {
		s.status.rejected.Add(1)
		var fe *FieldError
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		// Values come from anyone who can write to Redis: clip them, so a
		// huge field never makes a huge log line on every instance.
		s.logger.Error("rule rejected: keeping the last good version",
			zap.String("key", s.names.RuleKey(k, id)), zap.String("field", clip(field)),
			zap.Bool("has_last_good", old != nil), zap.String("error", clipN(err.Error(), 512)))
		emitRejected(k, id, "redis", err)
		return nil, false
	}
	return &Rule{Kind: k, ID: id, Fields: f, Value: v, Source: "redis", Overlay: f, partial: st != nil}, true
}

// fullResync reloads every rule from Redis and reconciles it with what is
// held: new and changed rules are applied, rules gone from Redis are dropped,
// unless Redis lost its data (see checkEpoch).
func (s *redisSource) fullResync(ctx context.Context, reason string) error {
	return s.resyncAttempt(ctx, reason, 1)
}

func (s *redisSource) resyncAttempt(ctx context.Context, reason string, attempt int) error {
	start := time.Now()
	if err := s.checkEpoch(ctx); err != nil {
		return err
	}
	// Note the change log's tail first: entries appended during the scan are
	// read again by the next poll, which is harmless.
	if err := s.streamTail(ctx); err != nil {
		return err
	}
	keys, err := s.scanRuleKeys(ctx)
	if err != nil {
		return err
	}
	hashes, err := s.readHashes(ctx, keys)
	if err != nil {
		return err
	}
	// Redis may have restarted empty during the scan: then the rules it
	// no longer has are lost data, not deletes. Start over, so checkEpoch
	// retains them.
	if m, err := s.client.Get(ctx, s.names.Epoch()).Result(); err != nil && err != redis.Nil {
		return err
	} else if m != s.epoch {
		if attempt >= 3 {
			return errors.New("redis epoch marker keeps changing during the resync")
		}
		return s.resyncAttempt(ctx, reason, attempt+1)
	}
	cur := s.snap.Load()
	var next layer
	var added, updated, removed, rejected int
	for _, k := range Kinds() {
		next[k] = make(map[string]*slot, len(hashes[k]))
		for id, f := range hashes[k] {
			old := cur.get(k, id)
			delete(s.retained, ruleRef{k, id})
			switch {
			case old != nil && old.Fields.Equal(f):
				next[k][id] = newSlot(old) // same rule: handlers see no change
			default:
				r, ok := s.parse(k, id, f, old)
				if !ok {
					rejected++
					if old != nil {
						next[k][id] = newSlot(old)
					}
					continue
				}
				if old == nil {
					added++
				} else {
					updated++
				}
				next[k][id] = newSlot(r)
				if s.loaded {
					if old != nil { // as a published change would: one line per changed rule
						s.logger.Info("rule updated", zap.String("key", s.names.RuleKey(k, id)), zap.String("by", "resync"))
					}
					s.applied(k, id, old, f)
				}
			}
		}
		for id, old := range cur[k] {
			if _, ok := next[k][id]; ok {
				continue
			}
			if s.retained[ruleRef{k, id}] {
				next[k][id] = old
				continue
			}
			removed++
			if s.loaded {
				s.applied(k, id, old.rule.Load(), nil)
			}
		}
	}
	s.snap.Store(&next)
	s.loaded = true
	s.status.updates.Add(int64(added + updated + removed))
	s.status.lastResync.Store(time.Now().UnixNano())
	s.status.resyncs.Add(1)
	total := 0
	for _, m := range next {
		total += len(m)
	}
	log := s.logger.Debug
	if reason != "periodic" || added+updated+removed+rejected > 0 {
		log = s.logger.Info
	}
	log("resynced rules from redis", zap.String("reason", reason), zap.Int("rules", total),
		zap.Int("added", added), zap.Int("updated", updated), zap.Int("removed", removed),
		zap.Int("rejected", rejected), zap.Int("retained", len(s.retained)),
		zap.Duration("took", time.Since(start)))
	s.flushFeedback(ctx)
	return nil
}

// checkEpoch detects a Redis that lost its data. The store keeps a random
// marker key in Redis; if it vanished or changed since last seen, Redis was
// restarted empty (or flushed): that is not an operator deleting rules, so
// every rule held now is retained until it is rewritten or deleted one by one.
func (s *redisSource) checkEpoch(ctx context.Context) error {
	key := s.names.Epoch()
	marker, err := s.client.Get(ctx, key).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	if marker == "" {
		var b [8]byte
		rand.Read(b[:])
		if err := s.client.SetNX(ctx, key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
			return err
		}
		if marker, err = s.client.Get(ctx, key).Result(); err != nil {
			return err
		}
	}
	if s.epoch != "" && marker != s.epoch {
		held := 0
		for _, k := range Kinds() {
			for id := range s.snap.Load()[k] {
				s.retained[ruleRef{k, id}] = true
				held++
			}
		}
		s.logger.Error("redis lost its data (epoch marker missing or changed): keeping every rule held in memory; "+
			"rewrite them to Redis to make them durable again, or DEL+PUBLISH to delete one",
			zap.String("marker", key), zap.Int("retained", held))
	}
	s.epoch = marker
	return nil
}

// scanRuleKeys lists every rule key with SCAN (never KEYS), on every master
// of a cluster.
func (s *redisSource) scanRuleKeys(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, k := range Kinds() {
			it := c.Scan(ctx, 0, s.names.pattern(k), 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				seen[it.Val()] = true
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	return keys, err
}

// readHashes reads rule hashes in pipelined batches, by kind and id.
func (s *redisSource) readHashes(ctx context.Context, keys []string) ([numKinds]map[string]Fields, error) {
	var out [numKinds]map[string]Fields
	for k := range out {
		out[k] = map[string]Fields{}
	}
	const batch = 500
	for i := 0; i < len(keys); i += batch {
		chunk := keys[i:min(i+batch, len(keys))]
		pipe := s.client.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for j, key := range chunk {
			cmds[j] = pipe.HGetAll(ctx, key)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil && !isWrongType(err) {
			return out, err
		}
		for j, key := range chunk {
			if err := cmds[j].Err(); isWrongType(err) {
				s.rejectNonHash(key)
				continue
			} else if err != nil && err != redis.Nil {
				return out, err
			}
			k, id, ok := s.names.parseKey(key)
			fields := cmds[j].Val()
			if !ok || len(fields) == 0 {
				continue // deleted since the scan, or not a rule key
			}
			if ValidID(id) != nil {
				s.logger.Warn("ignoring rule key with an invalid id", zap.String("key", clip(key)))
				continue
			}
			out[k][id] = Fields(fields)
		}
	}
	return out, nil
}

// streamTail remembers the newest change-log entry.
func (s *redisSource) streamTail(ctx context.Context) error {
	entries, err := s.client.XRevRangeN(ctx, s.names.Stream(), "+", "-", 1).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	s.streamID = "0-0"
	if len(entries) > 0 {
		s.streamID = entries[0].ID
	}
	return nil
}

// pollStream applies change-log entries newer than the last one read. It
// catches changes written through Sluice whose publish was missed.
func (s *redisSource) pollStream(ctx context.Context) error {
	for {
		entries, err := s.client.XRangeN(ctx, s.names.Stream(), "("+s.streamID, "+", 500).Result()
		if err != nil && err != redis.Nil {
			return err
		}
		// Entries name rules written through Sluice: re-read them all in
		// one batch, past the absent-id cache (a write is authoritative).
		refs := make([]ruleRef, 0, len(entries))
		values := make([]map[string]any, 0, len(entries))
		seen := make([]int64, 0, len(entries))
		for _, e := range entries {
			s.streamID = e.ID
			typ, _ := e.Values["type"].(string)
			id, _ := e.Values["id"].(string)
			k, ok := ParseKind(typ)
			if !ok || ValidID(id) != nil {
				continue
			}
			refs = append(refs, ruleRef{k, id})
			values = append(values, e.Values)
			seen = append(seen, s.refreshed[ruleRef{k, id}])
		}
		if err := s.refreshAll(ctx, refs); err != nil {
			return err
		}
		for i := range refs {
			s.observeDelay(values[i], seen[i])
		}
		if len(entries) < 500 {
			return nil
		}
	}
}

// observeDelay records the propagation delay of a change-log entry written
// by the admin API (it carries published_at): until the rule was first
// re-read after the publish (by its Pub/Sub message: seen), or until now if
// only this poll caught it. Clock skew between the writing instance and this
// one is included; a negative delay counts as 0.
func (s *redisSource) observeDelay(values map[string]any, seen int64) {
	v, _ := values["published_at"].(string)
	pub, err := strconv.ParseInt(v, 10, 64)
	if err != nil || pub <= 0 {
		return
	}
	at := time.Now().UnixNano()
	if seen >= pub {
		at = seen
	}
	propagationDelay.Observe(max(float64(at-pub), 0) / 1e9)
}

// Heartbeats: every instance refreshes its member in the sorted set
// gateway:instances (score = expiry time, ms) and counts the live ones, so
// a cluster quota can fall back to this instance's share when Redis fails.
const (
	instancesKey      = "gateway:instances"
	heartbeatInterval = 5 * time.Second
	heartbeatTTL      = 3 * heartbeatInterval
)

func (s *redisSource) heartbeat(ctx context.Context, now time.Time) error {
	if now.Before(s.nextHeartbeat) {
		return nil
	}
	s.nextHeartbeat = now.Add(heartbeatInterval)
	key := s.names.prefix + instancesKey
	pipe := s.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(heartbeatTTL).UnixMilli()), Member: s.instanceID})
	pipe.ZRemRangeByScore(ctx, key, "-inf", fmt.Sprint(now.UnixMilli()))
	card := pipe.ZCard(ctx, key)
	pipe.PExpire(ctx, key, heartbeatTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	s.instances.Store(max(card.Val(), 1))
	return nil
}

// isWrongType reports Redis's answer for a key of another type: an
// operator's typo (SET rate_limit:rule:x 1), not a connection problem.
func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

func (s *redisSource) rejectNonHash(key string) {
	s.status.rejected.Add(1)
	if k, id, ok := s.names.parseKey(key); ok && ValidID(id) == nil {
		s.feedback.verdict(k, id, nil, errors.New("the key is not a hash"))
	}
	s.logger.Error("rule rejected: the key is not a hash; keeping the last good version", zap.String("key", clip(key)))
}

// clip shortens untrusted text for a log line.
func clip(s string) string { return clipN(s, 64) }

func clipN(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%.*s… (%d bytes)", n, s, len(s))
	}
	return s
}
