package rulestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// History: every change of a rule (admin API, CLI, or a raw redis-cli write
// seen by the store) is recorded with its full previous and new raw fields
// in the list gateway:history:<kind>:<id>, newest first, at most
// historyLength entries. Every instance records the raw changes it sees; an
// entry whose version equals the newest one already recorded is dropped, so
// a change seen by the whole fleet (or written by the admin API, which
// records it in the same transaction) is recorded once. Without Redis the
// history is kept in memory.
const (
	historyKeyPrefix = "gateway:history:"
	historyLength    = 50
	// historyBytes bounds one rule's history: older entries go first.
	historyBytes = 1 << 20
)

// HistoryKey is the history list of rule id of kind k.
func (n keyNames) HistoryKey(k Kind, id string) string {
	return n.prefix + historyKeyPrefix + k.String() + ":" + id
}

// HistoryEntry is one recorded change. Fields are the raw fields held in
// Redis (or memory): the overlay of a static rule, or a whole rule.
type HistoryEntry struct {
	// Kind is the rule's kind: rate_limit, circuit_breaker, gray, binding or
	// one another module registers.
	Kind string `json:"kind"`
	// ID is the rule's id (a route name for a binding).
	ID string `json:"id"`
	// Version is the version of the rule's state after the change: of
	// Fields, or after a delete the declared rule's version ("" for a rule
	// the config does not declare).
	Version string `json:"version"`
	// PrevVersion is the version of the state before: of Prev, or the
	// declared rule's ("" for a new rule the config does not declare).
	PrevVersion string `json:"prev_version"`
	// Op is upsert, delete or rollback.
	Op string `json:"op"`
	// Prev are the raw fields before the change (nil for a new rule).
	Prev Fields `json:"prev"`
	// Fields are the raw fields after the change (nil after a delete).
	Fields Fields `json:"fields"`
	// Via is who made the change: redis (a write seen in Redis, e.g. with
	// redis-cli), admin_api, cli, rollback or apply.
	Via string `json:"via"`
	// Declared: the writer's config declares the rule, so Fields may be
	// an overlay that is incomplete on an instance that does not declare
	// it (unused.go).
	Declared bool `json:"declared,omitempty"`
	// Instance is the instance that recorded the change: host:pid.
	Instance string `json:"instance"`
	// At is when the change was recorded.
	At time.Time `json:"at"`
}

// newHistoryEntry records a change from prev to f (nil: a delete); op
// "rollback" marks a rollback, anything else is upsert or delete. st is
// the rule as the config declares it (nil: not declared): with nothing
// stored the rule's state is the declared one, and its versions are the
// declared version (see storedVersion), so an undo is recorded as a change
// to it and a rollback finds it.
func newHistoryEntry(k Kind, id string, st *Rule, prev, f Fields, via, op string) HistoryEntry {
	e := HistoryEntry{Kind: k.String(), ID: id, Op: "upsert", Prev: prev, Fields: f, Via: via,
		Instance: instanceName, At: time.Now().UTC()}
	if f == nil {
		e.Op = "delete"
	}
	if op == "rollback" {
		e.Op = op
	}
	e.Version, e.PrevVersion = storedVersion(st, f), storedVersion(st, prev)
	e.Declared = st != nil
	return e
}

// historyScript pushes an entry (with ARGV[4] = "1": unless the newest one
// has the same version), then trims the list to its length and byte
// budget. KEYS[1] list; ARGV entry, version, length, dedupe, bytes.
var historyScript = redis.NewScript(`
if ARGV[4] == '1' then
  local head = redis.call('LINDEX', KEYS[1], 0)
  if head then
    local ok, h = pcall(cjson.decode, head)
    if ok and type(h) == 'table' and h['version'] == ARGV[2] then return 0 end
  end
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[3]) - 1)
` + trimHistoryLua(5) + `
return 1`)

// trimHistoryLua keeps the newest entries of list KEYS[1] that fit in
// ARGV[budget] bytes, and always the newest one.
func trimHistoryLua(budget int) string {
	return fmt.Sprintf(`
local total, budget = 0, tonumber(ARGV[%d])
for i, e in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  total = total + #e
  if total > budget and i > 1 then
    redis.call('LTRIM', KEYS[1], 0, i - 2)
    break
  end
end`, budget)
}

// queueHistory queues an entry written by the admin API (dedupe false: a
// write that changes nothing is never sent) or seen by an instance
// (dedupe true: the fleet records a change once).
func (s *redisSource) queueHistory(ctx context.Context, p redis.Pipeliner, e HistoryEntry, dedupe bool) {
	k, _ := ParseKind(e.Kind)
	b, _ := json.Marshal(e)
	flag := "0"
	if dedupe {
		flag = "1"
	}
	historyScript.Eval(ctx, p, []string{s.names.HistoryKey(k, e.ID)}, string(b), e.Version, historyLength, flag, historyBytes)
}

// observedScript is historyScript for a change an instance saw in Redis: it
// is recorded only while the rule's hash still holds the fields seen. An
// instance that applies a change late (e.g. after fast admin writes, each
// recorded by its writer, or after a rollback) would otherwise record it
// again, after newer entries: a duplicate, or a change that seems to undo
// the rollback. A raw state overwritten before any instance recorded it is
// not recorded (the next entry's prev_version still names it). KEYS[1]
// list, KEYS[2] rule hash; ARGV entry, version, length, bytes, then the
// fields seen as name, value pairs (none for a delete).
var observedScript = redis.NewScript(`
local ok, cur = pcall(redis.call, 'HGETALL', KEYS[2])
if not ok or #cur ~= #ARGV - 4 then return 0 end
local held = {}
for i = 1, #cur, 2 do held[cur[i]] = cur[i + 1] end
for i = 5, #ARGV, 2 do
  if held[ARGV[i]] ~= ARGV[i + 1] then return 0 end
end
local head = redis.call('LINDEX', KEYS[1], 0)
if head then
  local dok, h = pcall(cjson.decode, head)
  if dok and type(h) == 'table' and h['version'] == ARGV[2] then return 0 end
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[3]) - 1)
` + trimHistoryLua(4) + `
return 1`)

// queueObserved queues the history entry of a change seen in Redis. On a
// Redis Cluster the rule hash and the list are in different slots, so one
// script cannot read both: there the entry is checked against the newest
// entry only (a late instance may record a change again).
func (s *redisSource) queueObserved(ctx context.Context, p redis.Pipeliner, e HistoryEntry) {
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		s.queueHistory(ctx, p, e, true)
		return
	}
	k, _ := ParseKind(e.Kind)
	b, _ := json.Marshal(e)
	args := []any{string(b), e.Version, historyLength, historyBytes}
	for _, name := range e.Fields.Names() {
		args = append(args, name, e.Fields[name])
	}
	observedScript.Eval(ctx, p, []string{s.names.HistoryKey(k, e.ID), s.names.RuleKey(k, e.ID)}, args...)
}

// history reads a rule's history, newest first.
func (s *redisSource) history(ctx context.Context, k Kind, id string) ([]HistoryEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*s.timeout)
	defer cancel()
	raw, err := s.client.LRange(ctx, s.names.HistoryKey(k, id), 0, historyLength-1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, 0, len(raw))
	for _, r := range raw {
		var e HistoryEntry
		if json.Unmarshal([]byte(r), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// record adds an entry to the in-memory history (no Redis). The caller
// holds m.mu.
func (m *memoryLayer) record(e HistoryEntry) {
	k, _ := ParseKind(e.Kind)
	ref := ruleRef{k, e.ID}
	if m.history == nil {
		m.history = map[ruleRef][]HistoryEntry{}
	}
	h := append([]HistoryEntry{e}, m.history[ref]...)
	if len(h) > historyLength {
		h = h[:historyLength]
	}
	total := 0
	for i, old := range h {
		b, _ := json.Marshal(old)
		if total += len(b); total > historyBytes && i > 0 {
			h = h[:i]
			break
		}
	}
	m.history[ref] = h
}

func (m *memoryLayer) historyOf(k Kind, id string) []HistoryEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]HistoryEntry{}, m.history[ruleRef{k, id}]...)
}

// History returns the recorded changes of a rule, newest first.
func (a *App) History(ctx context.Context, k Kind, id string) ([]HistoryEntry, error) {
	if a.source == nil {
		return a.memory.historyOf(k, id), nil
	}
	return a.source.history(ctx, k, id)
}
