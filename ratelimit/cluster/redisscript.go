package cluster

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// The cluster engines: each decision (or lease) is answered by a script on
// the Redis server, atomically. The decisions waiting at the same moment
// share one pipelined round trip (batcher.go), and those of one engine in
// it (on a Redis Cluster: of one engine and hash slot) share one script
// call over all their keys: Redis then dispatches one EVALSHA and reads its
// clock once for the lot, instead of once per decision. EVALSHA falls back
// to EVAL, which reloads the script, when Redis answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). The clock is Redis's own TIME, so the
// instances' clocks do not matter. Each key's state is one string whose
// name carries a hash tag, and each call refreshes its TTL.
//
// ARGV is a list of runs, each five values: how many of the next KEYS it
// covers, two numbers of the engine, then min and max: grant as many units
// as are available up to max, but only if at least min are (min = max =
// requested_tokens for one request; min = requested_tokens, max =
// lease_size for a lease). The decisions of one rule version are one run,
// so Redis parses and converts those numbers once per run, not per key.
// The scripts return four values per key, {granted, remaining, wait µs,
// reset µs}:
// remaining is what is left after the grant, wait the time until min more
// units will be there (0 if they are now; with no other spending
// meanwhile), reset the time until the quota is whole again (token bucket)
// or the current window ends (sliding window). A Redis error about one key
// (e.g. WRONGTYPE) is returned as that key's first value, a string, and
// leaves the other keys' decisions alone. The keys are decided in order,
// so a key named twice sees its first decision's spending. Numbers are
// written as Lua converts them (%.17g: exact for integers of µs), not
// through string.format, which cost Redis ~0.3 µs each.

// Each key's state is one string of packed doubles (struct.pack '<dd' or
// '<ddd', little-endian IEEE 754: exact for integers of µs), so a script
// call reads every key's state with one MGET and writes each with one SET
// PX (value and TTL together): two commands per key fewer than a hash's
// HMGET, HSET and PEXPIRE, which were most of Redis's CPU per decision. A
// key decided twice in one call reads what its first decision wrote (seen).
// A value that is not a state (another length: damaged, or written by
// something else) reads as absent and is replaced by fresh state with its
// TTL, as is a key of another type (MGET reads it as nil): an unreadable
// key repairs itself on its next decision instead of failing every one.
// (The earlier format's hashes live under other names, redisKey.)

// tokenBucketLua: each key {t = last update µs, n = tokens}; a run's
// numbers: rate per second, burst. The TTL is capped at 1e15 ms (forever,
// in effect) and formatted once per run, not for every key's SET, except
// for a key in debt (below zero, settle.go), which keeps it until repaid.
const tokenBucketLua = stateValidLua + `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local vals = redis.call('MGET', unpack(KEYS))
local seen, out, first, r = {}, {}, 1, 1
while r < #ARGV do
 local n = tonumber(ARGV[r])
 local rate, burst = tonumber(ARGV[r + 1]), tonumber(ARGV[r + 2])
 local want_min, want_max = tonumber(ARGV[r + 3]), tonumber(ARGV[r + 4])
 local ttl = string.format('%d', math.min(1e15, math.ceil(burst / rate * 1000) + 1000))
 for i = first, first + n - 1 do
  local key, a = KEYS[i], 4 * i - 4
  local v = seen[key]
  if v == nil then v = vals[i] end
  if v and #v ~= 16 then v = nil end
  do
    local now = clock
    local tokens = burst
    if v then
      local last
      last, tokens = struct.unpack('<dd', v)
      last, tokens = tb_valid(last, tokens, now, burst)
      if now > last then
        tokens = tokens + (now - last) * rate / 1000000
      else
        now = last
      end
      if tokens > burst then tokens = burst end
    end
    local granted, wait = 0, 0
    if tokens >= want_min then
      granted = math.min(want_max, math.floor(tokens))
      tokens = tokens - granted
    end
    if tokens < want_min then
      wait = math.ceil((want_min - tokens) * 1000000 / rate)
    end
    v = struct.pack('<dd', now, tokens)
    local kttl = ttl
    if tokens < 0 then
      kttl = string.format('%d', math.min(1e15, math.ceil((burst - tokens) / rate * 1000) + 1000))
    end
    local w = redis.pcall('SET', key, v, 'PX', kttl)
    if type(w) == 'table' and w.err then
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = w.err, 0, 0, 0
    else
      seen[key] = v
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = granted, math.max(0, math.floor(tokens)), wait,
        math.ceil((burst - tokens) * 1000000 / rate)
    end
  end
 end
 first, r = first + n, r + 5
end
return out
`

// slidingWindowLua: each key {s = current window start µs, c = its count,
// p = the previous window's count}; a run's numbers: window µs, limit. The
// same estimate as the local engine (engine/slidingwindow.go).
const slidingWindowLua = stateValidLua + `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local vals = redis.call('MGET', unpack(KEYS))
local seen, out, first, r = {}, {}, 1, 1
while r < #ARGV do
 local n = tonumber(ARGV[r])
 local size, limit = tonumber(ARGV[r + 1]), tonumber(ARGV[r + 2])
 local want_min, want_max = tonumber(ARGV[r + 3]), tonumber(ARGV[r + 4])
 local ttl = string.format('%d', math.min(1e15, math.ceil(2 * size / 1000) + 1000))
 for i = first, first + n - 1 do
  local key, a = KEYS[i], 4 * i - 4
  local v = seen[key]
  if v == nil then v = vals[i] end
  if v and #v ~= 24 then v = nil end
  do
    local now = clock
    local start = now - (now % size)
    local s, cur, prev
    if v then
      s, cur, prev = struct.unpack('<ddd', v)
      s, cur, prev = sw_valid(s, cur, prev, now, size, limit)
    else
      cur, prev = 0, 0
    end
    if s and s > start then
      start, now = s, s
    end
    if s ~= start then
      if s and start - s == size then prev = cur else prev = 0 end
      cur = 0
    end
    local est = prev * (size - (now - start)) / size + cur
    local granted, wait = 0, 0
    if est + want_min <= limit then
      granted = math.min(want_max, math.floor(limit - est))
      cur = cur + granted
      est = est + granted
    end
    if est + want_min > limit then
      local room = limit - want_min - cur
      local at
      if room >= 0 and prev > 0 then
        at = start + size * (1 - room / prev)
      else
        at = start + size + size * (1 - (limit - want_min) / cur)
      end
      wait = math.ceil(at - now)
    end
    v = struct.pack('<ddd', start, cur, prev)
    local w = redis.pcall('SET', key, v, 'PX', ttl)
    if type(w) == 'table' and w.err then
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = w.err, 0, 0, 0
    else
      seen[key] = v
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = granted, math.max(0, math.floor(limit - est)), wait,
        start + size - now
    end
  end
 end
 first, r = first + n, r + 5
end
return out
`

var (
	tokenBucketScript   = redis.NewScript(tokenBucketSource)
	slidingWindowScript = redis.NewScript(slidingWindowLua)
)

// Grant is a script's answer, times in ns.
type Grant struct {
	N, Remaining, Wait, Reset int64
}

// parseGrant reads a script's reply {granted, remaining, wait µs, reset µs}.
func parseGrant(cmd *redis.Cmd) (Grant, error) {
	res, err := cmd.Int64Slice()
	if err != nil {
		return Grant{}, err
	}
	if len(res) != 4 {
		return Grant{}, fmt.Errorf("ratelimit script: unexpected reply %v", res)
	}
	return Grant{N: res[0], Remaining: res[1], Wait: res[2] * 1000, Reset: res[3] * 1000}, nil
}

// parseGrants answers the calls of a script over many keys from its reply:
// four values per key, the first a string for a Redis error about that key.
func parseGrants(cmd *redis.Cmd, calls []*scriptCall) {
	vals, err := cmd.Slice()
	if err == nil && len(vals) != 4*len(calls) {
		err = fmt.Errorf("ratelimit script: %d values for %d keys", len(vals), len(calls))
	}
	for i, c := range calls {
		if err != nil {
			c.answer(Grant{}, err)
			continue
		}
		c.answer(parseKeyGrant(vals[4*i : 4*i+4]))
	}
}

// parseKeyGrant reads one key's four values of a script over many keys.
func parseKeyGrant(v []any) (Grant, error) {
	if msg, ok := v[0].(string); ok {
		return Grant{}, keyError(msg)
	}
	var n [4]int64
	for j := range n {
		x, ok := v[j].(int64)
		if !ok {
			return Grant{}, fmt.Errorf("ratelimit script: unexpected reply %v", v)
		}
		n[j] = x
	}
	return Grant{N: n[0], Remaining: n[1], Wait: n[2] * 1000, Reset: n[3] * 1000}, nil
}

// keyError is Redis's error about one key of a script over many, a reply
// error like any other (unreachable tells it from a Redis that cannot serve).
type keyError string

func (e keyError) Error() string { return string(e) }
func (keyError) RedisError()     {}

// RedisKey names a key's state in Redis:
//
//	<prefix>ratelimit:tb2:{<rule-id>:<key>}  token bucket (packed string)
//	<prefix>ratelimit:sw2:{<rule-id>:<key>}  sliding window (packed string)
//	<prefix>ratelimit:pc:{<rule-id>:<key>}   token bucket, control_behavior pace
//	<prefix>ratelimit:wu:{<rule-id>:<key>}   token bucket, warm_up or warm_up_pace
//
// The hash tag spreads a rule's keys over a Redis Cluster while keeping all
// of one key's state in one slot. The engine is in the name, so changing
// limit_type never reads the other engine's fields. The packed states have
// names of their own: the builds before that format kept a hash at tb and
// sw, and during a rolling upgrade such a build would meet our string
// there and answer WRONGTYPE (its on_redis_error) for as long as we kept
// the key alive. Apart, each build counts in its own keys. The pc and wu
// hashes kept their format and their names: both builds share them.
func RedisKey(prefix string, typ engine.LimitType, id string, key []byte) string {
	eng := "tb2"
	if typ == engine.SlidingWindow {
		eng = "sw2"
	}
	return RedisKeyOf(prefix, eng, id, key)
}

func RedisKeyOf(prefix, eng, id string, key []byte) string {
	b := make([]byte, 0, len(prefix)+len("ratelimit:tb2:{:}")+len(id)+len(key))
	b = append(b, prefix...)
	b = append(b, "ratelimit:"...)
	b = append(b, eng...)
	b = append(b, ":{"...)
	b = append(b, id...)
	b = append(b, ':')
	b = append(b, key...)
	b = append(b, '}')
	return string(b)
}
