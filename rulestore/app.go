package rulestore

import (
	"crypto/sha256"
	"fmt"
	"github.com/sluicegw/sluice/ratelimit/replay"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/rulestore/eventqueue"
	"github.com/sluicegw/sluice/rulestore/missing"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the rulestore app. Without Redis it serves its static rules alone.
type App struct {
	// Redis to load rules from and follow. Optional.
	Redis *redisconf.Config `json:"redis,omitempty"`
	// Prefix namespaces every key, channel and the stream.
	Prefix string `json:"prefix,omitempty"`
	// Resync is the period of the full reconciliation with Redis (default
	// 30s; from MinResync to a year and a day).
	Resync syntax.Duration `json:"resync,omitempty"`

	// RateLimit are static rate_limit rules, by id: typed, with the Redis
	// hashes' field names. A value may also be a string in the Redis
	// syntax ("qps": "5"). A Redis hash of the same id overlays one.
	RateLimit RuleSet[*RateLimitSpec] `json:"rate_limit,omitempty"`
	// CircuitBreaker are static circuit_breaker rules, by id, like
	// RateLimit.
	CircuitBreaker RuleSet[*CircuitBreakerSpec] `json:"circuit_breaker,omitempty"`
	// Gray are static gray (canary) rules, by id, like RateLimit.
	Gray RuleSet[*GraySpec] `json:"gray,omitempty"`
	// Binding are static route bindings, by route name: the rules each of
	// the three handlers applies on a route, like RateLimit.
	Binding RuleSet[*BindingSpec] `json:"binding,omitempty"`
	// OtherKinds are static rules of the kinds other packages register
	// (RegisterKind), by kind name, then id: {"<kind>": {"<id>": {...}}}.
	// Each rule is typed by its kind's Spec, like RateLimit's. The kinds
	// above are declared in their own fields, not here.
	OtherKinds KindRules `json:"rules,omitempty"`

	static   []map[string]*Rule        // by kind, then id
	overlays []map[string]*overlaySlot // one per static id (overlay.go)
	source   Source                    // the rules over the static ones: redis, or memory (nil before Provision)
	redis    RedisSource               // the source when it is Redis, else nil
	ctx      caddy.Context
	events   *caddyevents.App // nil if unavailable
	memory   *memoryLayer     // admin-API writes without Redis, shared across reloads

	eventQueue *eventqueue.Queue // see Emit

	seqMu       sync.Mutex
	seq         map[string]int               // see Occurrence
	declared    map[string][sha256.Size]byte // see SameAsDeclared
	logger      *zap.Logger
	missing     missing.Tracker[RuleRef] // rules asked for and not held (status.go, missing_log.go)
	used        sync.Map                 // RuleRef -> true: ids a handler holds a Handle on (see Uses)
	breakers    breakers                 // see Breakers
	previewers  previewers               // see SetPreviewer
	recordClock replay.Clock             // see RecordClock
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "rulestore",
		New: func() caddy.Module { return new(App) },
	}
}

// Rule is one validated rule as the store holds it.
type Rule struct {
	Kind   Kind
	ID     string
	Fields Fields
	// Value is the typed value the kind's parser returned.
	Value any
	// Source is "static", "redis" or "memory" (admin API writes without
	// Redis). A Redis or memory rule over a static one is their overlay.
	Source string
	// Overlay holds the raw fields kept in Redis (or memory) for this id,
	// nil for a rule as declared in the config. Fields are the effective
	// fields: the static rule's, overlaid by these.
	Overlay Fields

	// Partial: validated as the overlay of a static rule, so not complete
	// on its own.
	Partial bool
}

// Provision validates the static rules and prepares the Redis source. It
// does not connect: Provision also runs for `caddy validate`.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.ctx = ctx
	a.missing.Open()
	a.recordClock.Tick = replay.CoarseTick
	m, _, err := memoryPool.LoadOrNew(memoryKey, newMemoryLayer)
	if err != nil {
		return err
	}
	a.memory = m.(*memoryLayer)
	a.source = a.memory
	if ev, err := ctx.AppIfConfigured("events"); err == nil { // events has subscribers only if configured
		a.events, _ = ev.(*caddyevents.App)
	}
	a.eventQueue = eventqueue.New(a.events, a.logger)
	a.static = make([]map[string]*Rule, NumKinds())
	a.overlays = make([]map[string]*overlaySlot, NumKinds())
	for _, k := range Kinds() {
		a.static[k] = make(map[string]*Rule)
		a.overlays[k] = make(map[string]*overlaySlot)
		for id, f := range a.staticFields(k) {
			if _, ok := f["id"]; ok {
				return fmt.Errorf("static %s rule %q: field id: only an inline rule takes an id (a static rule's id is its key)", k, id)
			}
			v, err := Parse(k, id, f)
			if err != nil {
				return fmt.Errorf("static %s rule %q: %w", k, id, err)
			}
			WarnRenamed(a.logger, k, id, f)
			a.static[k][id] = &Rule{Kind: k, ID: id, Fields: f, Value: v, Source: "static"}
			a.overlays[k][id] = new(overlaySlot)
		}
	}
	if a.Redis == nil {
		if err := a.checkStaticRefs(); err != nil {
			return err
		}
	}
	if err := a.registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if a.Redis == nil {
		return nil
	}
	if a.Resync == 0 {
		a.Resync = syntax.Duration(30 * time.Second)
	}
	if r := time.Duration(a.Resync); r < MinResync || r > syntax.MaxRuleDuration {
		return fmt.Errorf("rulestore resync: want a duration from %s to %s, got %s (each resync reads every rule)", MinResync, syntax.MaxRuleDuration, r)
	}
	newSource := redisSources.get("redis")
	if newSource == nil {
		return fmt.Errorf("rulestore: redis is configured, but this build has no Redis source " +
			"(import github.com/sluicegw/sluice/rulestore/redissource)")
	}
	cfg := RedisSourceConfig{Redis: a.Redis, Prefix: a.Prefix, Resync: time.Duration(a.Resync), Logger: a.logger}
	// A reload that changes the Redis settings gets a new source: until
	// its first load completes, it serves the rules the running one
	// holds, so a Redis-only rule never lapses during the reload.
	if prev := active(); prev != nil && prev.redis != nil {
		cfg.Held = prev.redis.Layer()
	}
	src, err := newSource(cfg)
	if err != nil {
		return err
	}
	a.source, a.redis = src, src
	return nil
}

// Start begins following Redis. It never blocks on Redis: until the first
// load completes, lookups answer from the static rules.
func (a *App) Start() error {
	go a.eventQueue.Run(a.ctx)
	go a.runTickers()
	go a.logMissing()
	if a.redis != nil {
		a.redis.Start(a)
	} else {
		a.logger.Info("no redis configured: serving the rules declared in the config only")
	}
	return nil
}

// Stop has nothing to stop: the event and ticker goroutines end with the
// config's context, and the Redis source is shared with the next
// generation and released in Cleanup, so a reload loses no update.
func (a *App) Stop() error {
	return nil
}

// Cleanup releases this generation's hold on the shared Redis source.
func (a *App) Cleanup() error {
	if a.memory != nil {
		memoryPool.Delete(memoryKey)
	}
	if a.redis != nil {
		return a.redis.Release(a)
	}
	return nil
}

// Lookup returns the rule of kind k with this id, or nil. A Redis (or
// memory) rule overlays a static rule of the same id field by field while it
// exists (see overlay.go). It reads local memory only, takes no lock and
// does not allocate.
func (a *App) Lookup(k Kind, id string) *Rule {
	if r := a.overlayLayer().Get(k, id); r != nil {
		if e := a.effective(k, id, r); e != nil {
			return e
		}
	}
	return ByKind(a.static, k)[id]
}

// Route returns the binding of a route, or nil.
func (a *App) Route(route string) *RouteBinding {
	if r := a.Lookup(Binding, route); r != nil {
		return r.Value.(*RouteBinding)
	}
	return nil
}

// Client returns the store's shared Redis client, or nil without Redis.
// Handlers that keep state in Redis (cluster-wide quotas) use it, so there is
// one connection configuration and one pool per Caddy.
func (a *App) Client() redis.UniversalClient {
	if a.redis == nil {
		return nil
	}
	return a.redis.Client()
}

// ClientState returns the value a handler package keeps with the store's
// Redis client under key (nil without Redis), made by newValue on first
// use. It lives exactly as long as the client: a reload that keeps the
// Redis settings keeps it, one that changes them starts afresh, so such
// state (e.g. the cluster rate limits' health gate) is never process-wide.
// newValue should be a plain function, so the lookup does not allocate.
func (a *App) ClientState(key string, newValue func(redis.UniversalClient) any) any {
	if a.redis == nil {
		return nil
	}
	return a.redis.ClientState(key, newValue)
}

// Source is the source of the rules over the static ones this app holds:
// Redis (a RedisSource) or memory; nil before Provision.
func (a *App) Source() Source { return a.source }

// KeyPrefix returns the namespace prepended to every Redis key.
func (a *App) KeyPrefix() string { return a.Prefix }

// LiveInstances is the number of Caddy instances following the same Redis
// and prefix, from their heartbeats (at least 1; 1 without Redis). It is the
// divisor of a cluster quota's local share while Redis is unreachable.
func (a *App) LiveInstances() int {
	if a.redis == nil {
		return 1
	}
	return a.redis.LiveInstances()
}

// HasRedis reports whether rules may arrive from Redis after start-up.
func (a *App) HasRedis() bool { return a.redis != nil }

// Require checks at provision time that a handler's rule (or route binding)
// exists. Without Redis a missing id is a typo and an error; with Redis the
// rule may arrive later, so it is only a warning. Before the first load from
// Redis (a cold start) the rule may well be there: it is listed as missing
// without a warning, and a request that still finds it missing warns.
func (a *App) Require(k Kind, id string) error {
	if a.Lookup(k, id) != nil {
		return nil
	}
	if a.redis == nil {
		return CheckRef(staticDeclared{a}, k, id)
	}
	if a.redis.Connection().LastResync.IsZero() {
		a.warnTypo(k, id) // the warning WarnMissing gives below, for a cold start (and caddy validate)
		a.missing.Note(RuleRef{k, id})
		return nil
	}
	a.WarnMissing(k, id)
	return nil
}

// Rules returns every rule of kind k currently in force, Redis (or, without
// Redis, rules written through the admin API) overlaying static.
func (a *App) Rules(k Kind) map[string]*Rule {
	out := make(map[string]*Rule)
	for id, r := range ByKind(a.static, k) {
		out[id] = r
	}
	for id, s := range ByKind(*a.overlayLayer(), k) {
		if e := a.effective(k, id, s.Rule.Load()); e != nil {
			out[id] = e
		}
	}
	return out
}

// Count is len(Rules(k)) without building the map: O(static rules).
func (a *App) Count(k Kind) int {
	over := ByKind(*a.overlayLayer(), k)
	n := len(over)
	for id := range ByKind(a.static, k) {
		if over[id] == nil {
			n++
		}
	}
	return n
}

// Get loads the rulestore app from a Caddy context; handlers call it in
// Provision. A config without a rulestore block gets an empty static store.
func Get(ctx caddy.Context) (*App, error) {
	v, err := ctx.App("rulestore")
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// MinResync is the shortest resync period: each resync reads every rule,
// so a shorter one turns the safety net into load on Redis.
const MinResync = time.Second

var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

// SameAsDeclared reports whether digest is the one first declared under
// name within this config (true for the first declaration): two inline
// blocks that give one id must be one rule.
func (a *App) SameAsDeclared(name string, digest [sha256.Size]byte) bool {
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	if first, ok := a.declared[name]; ok {
		return first == digest
	}
	if a.declared == nil {
		a.declared = map[string][sha256.Size]byte{}
	}
	a.declared[name] = digest
	return true
}

// Occurrence counts the calls with this name within this config: 1 for
// the first, 2 for the second... Handlers provision in config order, so a
// handler that names its state by its contents (an inline rule's hash)
// tells apart two identical blocks, with the same names on every reload.
func (a *App) Occurrence(name string) int {
	a.seqMu.Lock()
	defer a.seqMu.Unlock()
	if a.seq == nil {
		a.seq = map[string]int{}
	}
	a.seq[name]++
	return a.seq[name]
}
