package ratelimit

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The cluster engines: each decision (or lease) is one script run on the
// Redis server, atomic (EVALSHA, falling back to EVAL, which reloads the script, when Redis
// answers NOSCRIPT, e.g. after a restart or SCRIPT FLUSH). The decisions
// waiting at the same moment share one pipelined round trip (batcher.go). The clock is Redis's own TIME, so
// the instances' clocks do not matter. Each script works on one hash key
// whose name carries a hash tag, and refreshes its TTL.
//
// Both take ARGV min and max: grant as many units as are available up to
// max, but only if at least min are (min = max = requested_tokens for one
// request; min = requested_tokens, max = lease_size for a lease). They
// return {granted, remaining, wait µs, reset µs}: remaining is what is left
// after the grant, wait the time until min more units will be there (0 if
// they are now; with no other spending meanwhile), reset the time until the quota is whole again (token
// bucket) or the current window ends (sliding window).

// tokenBucketLua: KEYS[1] hash {t = last update µs, n = tokens}; ARGV rate
// per second, burst, min, max.
const tokenBucketLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want_min = tonumber(ARGV[3])
local want_max = tonumber(ARGV[4])
local v = redis.call('HMGET', KEYS[1], 't', 'n')
local last = tonumber(v[1])
local tokens = burst
if last then
  tokens = tonumber(v[2]) or burst
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
redis.call('HSET', KEYS[1], 't', string.format('%.0f', now), 'n', string.format('%.6f', tokens))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil(burst / rate * 1000) + 1000))
return {granted, math.floor(tokens), wait, math.ceil((burst - tokens) * 1000000 / rate)}
`

// slidingWindowLua: KEYS[1] hash {s = current window start µs, c = its
// count, p = the previous window's count}; ARGV window µs, limit, min, max.
// The same estimate as the local engine (slidingwindow.go).
const slidingWindowLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local size = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local want_min = tonumber(ARGV[3])
local want_max = tonumber(ARGV[4])
local start = now - (now % size)
local v = redis.call('HMGET', KEYS[1], 's', 'c', 'p')
local s = tonumber(v[1])
local cur = tonumber(v[2]) or 0
local prev = tonumber(v[3]) or 0
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
redis.call('HSET', KEYS[1], 's', string.format('%.0f', start), 'c', cur, 'p', prev)
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil(2 * size / 1000) + 1000))
return {granted, math.max(0, math.floor(limit - est)), wait, start + size - now}
`

var (
	tokenBucketScript   = redis.NewScript(tokenBucketLua)
	slidingWindowScript = redis.NewScript(slidingWindowLua)
)

// grant is a script's answer, times in ns.
type grant struct {
	n, remaining, wait, reset int64
}

// parseGrant reads a script's reply {granted, remaining, wait µs, reset µs}.
func parseGrant(cmd *redis.Cmd) (grant, error) {
	res, err := cmd.Int64Slice()
	if err != nil {
		return grant{}, err
	}
	if len(res) != 4 {
		return grant{}, fmt.Errorf("ratelimit script: unexpected reply %v", res)
	}
	return grant{n: res[0], remaining: res[1], wait: res[2] * 1000, reset: res[3] * 1000}, nil
}

// redisKey names a key's state in Redis:
//
//	<prefix>ratelimit:tb:{<rule-id>:<key>}   token bucket
//	<prefix>ratelimit:sw:{<rule-id>:<key>}   sliding window
//	<prefix>ratelimit:pc:{<rule-id>:<key>}   token bucket, control_behavior pace
//	<prefix>ratelimit:wu:{<rule-id>:<key>}   token bucket, warm_up or warm_up_pace
//
// The hash tag spreads a rule's keys over a Redis Cluster while keeping all
// of one key's state in one slot. The engine is in the name, so changing
// limit_type never reads the other engine's fields.
func redisKey(prefix string, typ LimitType, id string, key []byte) string {
	eng := "tb"
	if typ == SlidingWindow {
		eng = "sw"
	}
	return redisKeyOf(prefix, eng, id, key)
}

func redisKeyOf(prefix, eng, id string, key []byte) string {
	b := make([]byte, 0, len(prefix)+len("ratelimit:tb:{:}")+len(id)+len(key))
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
