package cluster

import "github.com/redis/go-redis/v9"

// settleLua charges a settlement to one key's state in Redis (the same
// packed state as the decision scripts, redisscript.go): ARGV the engine
// ('tb' or 'sw'), its two numbers (rate and burst, or window µs and
// limit) and the tokens to charge (negative: a refund). A token bucket is
// charged as of its last decision (chargeAsOfLast), may go below zero
// (debt) and never above burst; its TTL covers the time to refill the debt
// too (counted from now, so a little longer than needed). A sliding window's count may go over its limit and
// never below zero. It answers like a decision, {0, remaining, debt, 0},
// with debt 1 when this charge took the key into debt (a bucket below
// zero from zero or above, a window's estimate over its limit from at or
// under it), else 0.
const settleLua = stateValidLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local a, b, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local v = redis.call('GET', key)
if ARGV[1] == 'tb' then
  if v and #v ~= 16 then v = nil end -- unreadable: fresh state, as the decisions do
  local rate, burst, tokens = a, b, b
  if v then
    -- as of the key's last decision, as the local engine charges
    local last
    last, tokens = struct.unpack('<dd', v)
    now, tokens = tb_valid(last, tokens, now, burst)
    if tokens > burst then tokens = burst end
  end
  local before = tokens
  tokens = math.min(tokens - n, burst)
  local debt = 0
  if before >= 0 and tokens < 0 then debt = 1 end
  local ttl = string.format('%d', math.min(1e15, math.ceil((burst - tokens) / rate * 1000) + 1000))
  redis.call('SET', key, struct.pack('<dd', now, tokens), 'PX', ttl)
  return {0, math.max(0, math.floor(tokens)), debt, 0}
end
if v and #v ~= 24 then v = nil end
local size, limit = a, b
local start = now - (now % size)
local s, cur, prev
if v then
  s, cur, prev = struct.unpack('<ddd', v)
  s, cur, prev = sw_valid(s, cur, prev, now, size, limit)
else
  cur, prev = 0, 0
end
if s and s > start then start = s end
if s ~= start then
  if s and start - s == size then prev = cur else prev = 0 end
  cur = 0
end
local weight = (size - (now - start)) / size
local before = prev * weight + cur
cur = math.max(cur + n, 0)
local debt = 0
if before <= limit and prev * weight + cur > limit then debt = 1 end
local ttl = string.format('%d', math.min(1e15, math.ceil(2 * size / 1000) + 1000))
redis.call('SET', key, struct.pack('<ddd', start, cur, prev), 'PX', ttl)
return {0, math.max(0, math.floor(limit - cur)), debt, 0}
`

var SettleScript = redis.NewScript(settleLua)
