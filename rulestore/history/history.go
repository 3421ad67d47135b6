// Package history owns a rule's recorded changes: the entry kept for each
// change, and the capped list of entries per rule in Redis or in memory
// (history.go): the Lua scripts that push an entry once for the whole
// fleet and trim the list to its length and byte budget, reading it back,
// and the same bounds for the in-memory list of a store without Redis.
// The rulestore makes the entries and names the keys; this package knows
// no rule kinds.
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// A rule's history is a list, newest first, of at most Length entries and
// Bytes bytes; an entry whose version equals the newest one already
// recorded is dropped, so a change seen by the whole fleet is recorded
// once.
const (
	// KeyPrefix starts every history list's key, after the store's prefix.
	KeyPrefix = "gateway:history:"
	// Length is the most entries a rule's history keeps.
	Length = 50
	// Bytes bounds one rule's history: older entries go first.
	Bytes = 1 << 20
)

// Entry is one recorded change. Fields are the raw fields held in
// Redis (or memory): the overlay of a static rule, or a whole rule.
type Entry struct {
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
	Prev map[string]string `json:"prev"`
	// Fields are the raw fields after the change (nil after a delete).
	Fields map[string]string `json:"fields"`
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

// pushScript pushes an entry (with ARGV[4] = "1": unless the newest one
// has the same version), then trims the list to its length and byte
// budget. KEYS[1] list; ARGV entry, version, length, dedupe, bytes.
var pushScript = redis.NewScript(`
if ARGV[4] == '1' then
  local head = redis.call('LINDEX', KEYS[1], 0)
  if head then
    local ok, h = pcall(cjson.decode, head)
    if ok and type(h) == 'table' and h['version'] == ARGV[2] then return 0 end
  end
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[3]) - 1)
` + trimLua(5) + `
return 1`)

// trimLua keeps the newest entries of list KEYS[1] that fit in
// ARGV[budget] bytes, and always the newest one.
func trimLua(budget int) string {
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

// Push queues on p the push of e to the list at key: written by the
// admin API (dedupe false: a write that changes nothing is never sent) or
// seen by an instance (dedupe true: the fleet records a change once).
func Push(ctx context.Context, p redis.Pipeliner, key string, e Entry, dedupe bool) {
	b, _ := json.Marshal(e)
	flag := "0"
	if dedupe {
		flag = "1"
	}
	pushScript.Eval(ctx, p, []string{key}, string(b), e.Version, Length, flag, Bytes)
}

// observedScript is pushScript for a change an instance saw in Redis: it
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
` + trimLua(4) + `
return 1`)

// PushObserved queues on p the entry of a change seen in Redis, to the
// list at key, while the rule's hash at ruleKey still holds the fields
// seen. Both keys must be in one slot (not on a Redis Cluster: there the
// caller pushes with dedupe instead).
func PushObserved(ctx context.Context, p redis.Pipeliner, key, ruleKey string, e Entry) {
	b, _ := json.Marshal(e)
	args := []any{string(b), e.Version, Length, Bytes}
	for _, name := range slices.Sorted(maps.Keys(e.Fields)) {
		args = append(args, name, e.Fields[name])
	}
	observedScript.Eval(ctx, p, []string{key, ruleKey}, args...)
}

// Read reads the list at key, newest first; an entry that does not
// decode is left out.
func Read(ctx context.Context, c redis.Cmdable, key string) ([]Entry, error) {
	raw, err := c.LRange(ctx, key, 0, Length-1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(raw))
	for _, r := range raw {
		var e Entry
		if json.Unmarshal([]byte(r), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// Prepend adds e before h, the in-memory history of a store without
// Redis, within the same length and byte budget as a list in Redis.
func Prepend(h []Entry, e Entry) []Entry {
	h = append([]Entry{e}, h...)
	if len(h) > Length {
		h = h[:Length]
	}
	total := 0
	for i, old := range h {
		b, _ := json.Marshal(old)
		if total += len(b); total > Bytes && i > 0 {
			h = h[:i]
			break
		}
	}
	return h
}
