package rulestore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore/history"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/status"
	"go.uber.org/zap"
)

// A Source holds the rules over the static ones and takes the admin API's
// writes: this process's memory without Redis (memory.go), or Redis
// (package rulestore/redissource). The app holds one; handlers never see
// it, they read the app's Handles.
type Source interface {
	// Layer is the rules held now: an atomic load, no lock, no allocation.
	Layer() *Layer
	// Changes moves after every change of the layer (App.Changes).
	Changes() uint64
	// Name is where writes go: "redis" or "memory".
	Name() string
	// Write reads rule id's raw fields, lets build choose the new ones
	// (nil: delete; an error writes nothing) and stores them with their
	// history entry (via and op name the writer). st is the config's rule
	// of that id, or nil.
	Write(ctx context.Context, k Kind, id, via, op string, st *Rule, build func(cur Fields) (Fields, error)) error
	// ApplySet reads the raw fields of every ref, lets decide choose the
	// writes and stores them all at once, or none. static gives the
	// config's rule of an id, or nil.
	ApplySet(ctx context.Context, refs map[RuleRef]bool, static func(Kind, string) *Rule, decide func(map[RuleRef]Fields) ([]ApplyObject, error)) error
	// Patch sets fields of a rule held, if its fields hold expect (see
	// App.Patch); it reports whether it wrote.
	Patch(ctx context.Context, p PatchRequest) (bool, error)
	// Exists reports whether the source holds rule id: for Redis, read
	// there, not from this instance's copy.
	Exists(ctx context.Context, k Kind, id string) (bool, error)
	// History is a rule's recorded changes, newest first.
	History(ctx context.Context, k Kind, id string) ([]history.Entry, error)
	// RecentChanges are the newest changes of any rule, newest first.
	RecentChanges(ctx context.Context) ([]RecentChange, error)
}

// PatchRequest is one App.Patch for a Source.
type PatchRequest struct {
	Kind Kind
	ID   string
	// Expect are the fields the rule must hold for the patch to apply.
	Expect Fields
	// Patch are the fields to set.
	Patch Fields
	// Merged are the rule's effective fields with Patch applied, Value
	// their parsed value.
	Merged Fields
	Value  any
	// Current is the rule in force when the patch was checked; Static the
	// config's rule of the id, or nil.
	Current, Static *Rule
}

// A RedisSource is the Source that follows the rules kept in Redis: what
// the app asks of it beyond a Source. Package rulestore/redissource
// implements it and registers it with RegisterRedisSource.
type RedisSource interface {
	Source
	// Start begins following Redis for app, the newest started config;
	// later calls only record the app.
	Start(app *App)
	// Release drops app's hold on the source (Cleanup); the last one
	// stops it.
	Release(app *App) error
	// Client is the shared Redis client.
	Client() redis.UniversalClient
	// ClientState is App.ClientState.
	ClientState(key string, newValue func(redis.UniversalClient) any) any
	// LiveInstances is App.LiveInstances.
	LiveInstances() int
	// Connection is the state of the connection to Redis.
	Connection() Connection
	// Rejected lists the rules whose last version in Redis was rejected.
	Rejected() []InvalidRule
	// RejectedRule is the rejection of one rule, or nil.
	RejectedRule(k Kind, id string) *RejectedView
	// Skipped lists the keys the last resync skipped.
	Skipped() []InvalidRule
	// Verdicts are the rule's stored fields and every instance's verdict.
	Verdicts(ctx context.Context, k Kind, id string) (stored Fields, verdicts []InstanceVerdict, err error)
	// FleetDeclares reads which live instances declare which rules: the
	// function it returns names the live instances that lack the
	// declaration of a rule some live instance declares.
	FleetDeclares(ctx context.Context) (lacking func(k Kind, id string) []string, err error)
	// AskImpact asks every live instance for its answer to q (each
	// answers with App.LocalImpact) and sums those that come within
	// q.Wait.
	AskImpact(ctx context.Context, q ImpactQuery) (replay.Impact, error)
}

// Connection is what a RedisSource reports of its connection
// (status.Connection).
type Connection = status.Connection

// RedisSourceConfig is what the app gives a new RedisSource.
type RedisSourceConfig struct {
	Redis  *redisconf.Config
	Prefix string
	Resync time.Duration
	Logger *zap.Logger
	// Held is the layer the running config's Redis source holds (nil if
	// none): a source with new settings serves it until its first load.
	Held *Layer
}

// NewRedisSourceFunc returns the RedisSource for cfg, shared by every
// config generation with the same settings.
type NewRedisSourceFunc func(cfg RedisSourceConfig) (RedisSource, error)

var redisSources registry[NewRedisSourceFunc]

// RegisterRedisSource sets how the app follows Redis; package
// rulestore/redissource calls it from init.
func RegisterRedisSource(fn NewRedisSourceFunc) { redisSources.put("redis", fn) }
