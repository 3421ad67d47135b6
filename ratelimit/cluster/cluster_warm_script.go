package cluster

import "github.com/redis/go-redis/v9"

// warmLua is the warm-up curve of a cluster rule (control_behavior
// warm_up or warm_up_pace with scope cluster): the model of engine/warmup.go,
// with the bucket in Redis and Redis's own TIME as the clock, so the
// fleet warms up once, as the upstream does, and the instances' clocks do
// not matter. Its unit is one request (requested_tokens permits), which
// gives the same curve as the local bucket's permits when every request
// of the rule costs the same.
//
// KEYS[1] hash {n = when the next request may go, µs of Redis time; s =
// requests stored}; ARGV stable interval µs (cost/qps, fractional), cold
// factor, warm_up_period µs, tolerance µs (how far ahead a slot may be and
// still be taken: max_queue_wait for warm_up_pace, the burst's time for
// warm_up). A missing key is cold (a full store). The reply is paceLua's:
// {1, remaining, wait µs until the slot, reset µs until next} when the
// slot is taken, {0, 0, retry µs, wait µs} when it lies beyond the
// tolerance. The key lives until an idle bucket would be cold again (its
// store refilled: one period past next) plus a second. A key that is not
// such a hash (damaged, or written by something else) starts cold afresh.
const warmLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stable = tonumber(ARGV[1])
local cold = stable * tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local tol = tonumber(ARGV[4])
local threshold = 0.5 * period / stable
local maxp = threshold + 2 * period / (stable + cold)
local slope = (cold - stable) / (maxp - threshold)
local cooldown = period / maxp
local function interval(s)
  if s <= threshold then return stable end
  return stable + (s - threshold) * slope
end
local ok, st = pcall(redis.call, 'HMGET', KEYS[1], 'n', 's')
if not ok then redis.call('DEL', KEYS[1]) st = {} end
local nxt, stored = tonumber(st[1]), tonumber(st[2])
if not nxt or not stored then
  nxt, stored = now, maxp
elseif now > nxt then
  stored = math.min(maxp, stored + (now - nxt) / cooldown)
  nxt = now
end
local wait = nxt - now
if wait > tol then
  return {0, 0, math.ceil(wait - tol), math.ceil(wait)}
end
local take = math.min(1, stored)
local cost = stable * (1 - take)
local above = stored - threshold
if above > 0 then
  local hi = math.min(above, take)
  cost = cost + hi * (interval(stored) + interval(stored - hi)) / 2
  take = take - hi
end
cost = cost + stable * take
nxt = nxt + cost
stored = stored - math.min(1, stored)
redis.call('HSET', KEYS[1], 'n', string.format('%.3f', nxt), 's', string.format('%.6f', stored))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil((nxt - now + period) / 1000) + 1000))
local remaining = 0
local free = now + tol - nxt
if free >= 0 then remaining = math.floor(free / math.max(interval(stored), 0.001)) + 1 end
return {1, remaining, math.ceil(wait), math.ceil(nxt - now)}
`

var warmScript = redis.NewScript(warmLua)
