package cluster

import "github.com/redis/go-redis/v9"

// A nested quota's path (a leaf key and its ancestors, nested.Spend) with
// scope cluster keeps one Redis hash per node (NestedRedisKey) holding
// nested.State's six numbers: at, lv, rs, gat, gl, gu. nestedLua is
// nested.Spend's decision ported line for line: one call reads every
// level's hash, decides, and writes them all or none, so a spend along a
// three-level path is one round trip.
//
// Times are Unix ns kept as decimal strings: a Lua number (a double)
// holds 2^53 ns, about 104 days, so the script subtracts two times as
// (seconds, ns) pairs (nsdiff), which is exact for any gap it refills
// over, and compares windows as strings. Counts are written with %.17g,
// which a double reads back exactly, so the script and nested.Spend agree
// to the last bit on the same inputs (nested_script_test.go).
//
// KEYS: one hash per level, the leaf first. ARGV: {n, now (ns; empty:
// Redis's TIME), depth}, then per level nestedLevelArgs values: kind (0
// token bucket, 1 calendar), qps, burst, quota, guarantee, what its
// children's guarantees are shares of (share qps, share burst, share
// quota), backed (1: the share is its own guarantee handed down), its
// window's start and end (calendar, ns, from the instance's clock: Redis
// has no time zones) and the hash's TTL in ms. It returns {allowed (1|0),
// refused level (-1 when allowed), wait (ns, string)}, then per level
// seven strings: guaranteed, borrowed, used, ceiling, remaining,
// guarantee left, guaranteed used (nested.Level).
const nestedLua = `
local function split(s)
  s = tostring(s or '0')
  if #s <= 9 then return 0, tonumber(s) or 0 end
  return tonumber(string.sub(s, 1, -10)) or 0, tonumber(string.sub(s, -9)) or 0
end
local function nsdiff(a, b)
  local as, an = split(a)
  local bs, bn = split(b)
  return (as - bs) * 1e9 + (an - bn)
end
local function ceilns(x) return math.ceil(x * 1e9) end
local function g17(x) return string.format('%.17g', x) end
local MAXWAIT = 9223372036854775807
local slack = 1e-9

local n, now, depth = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if now == '' then
  local t = redis.call('TIME')
  now = t[1] .. string.format('%06d', tonumber(t[2])) .. '000'
end
local L, S0 = {}, {}
for i = 1, depth do
  local a = 3 + (i - 1) * 12
  L[i] = {cal = ARGV[a + 1] == '1', qps = tonumber(ARGV[a + 2]), burst = tonumber(ARGV[a + 3]),
    quota = tonumber(ARGV[a + 4]), g = tonumber(ARGV[a + 5]), sqps = tonumber(ARGV[a + 6]),
    sburst = tonumber(ARGV[a + 7]), squota = tonumber(ARGV[a + 8]), backed = ARGV[a + 9] == '1',
    wstart = ARGV[a + 10], wend = ARGV[a + 11], ttl = ARGV[a + 12]}
  local h = redis.call('HMGET', KEYS[i], 'at', 'lv', 'rs', 'gat', 'gl', 'gu')
  S0[i] = {at = h[1] or '0', lv = tonumber(h[2]) or 0, rs = tonumber(h[3]) or 0,
    gat = h[4] or '0', gl = tonumber(h[5]) or 0, gu = tonumber(h[6]) or 0}
end

local function refill(at, tokens, rate, burst)
  if at == '0' then return now, burst end
  if nsdiff(now, at) > 0 then
    tokens = tokens + nsdiff(now, at) * rate / 1e9
    at = now
  end
  if tokens > burst then tokens = burst end
  return at, tokens
end
local function free(s, l)
  if not l.cal then return s.lv end
  return l.quota - s.lv - s.rs
end
local function spend(s, l, x, reserved)
  if not l.cal then s.lv = s.lv - x return end
  s.lv = s.lv + x
  s.rs = s.rs - reserved
end
local function wait(s, l, level)
  if not l.cal then return ceilns((level - s.lv) / l.qps) end
  return nsdiff(l.wend, now)
end

local function grant(c, p, g, pl, sh, pbacked)
  if not pl.cal then
    c.gat, c.gl = refill(c.gat, c.gl, g * sh.sqps, g * sh.sburst)
    return
  end
  if c.gat ~= p.at then
    local left = math.min(g * sh.squota, math.max(free(p, pl), 0))
    if pbacked then left = math.min(left, math.max(p.gl - p.rs, 0)) end
    c.gat, c.gl, c.gu = p.at, left, 0
    p.rs = p.rs + left
  end
end

local function guaranteed(c, g, pl, sh, backed, chained, height, x)
  if not pl.cal then
    local floor = height * g * sh.sburst
    if chained and c.gl - x >= -floor - slack then return x end
    return math.min(x, math.max(c.gl, 0))
  end
  if backed and not chained then return math.min(x, math.max(c.gl - c.rs, 0)) end
  return math.min(x, math.max(c.gl, 0))
end

local function lend(c, p, g, pl, sh, backed, chained, height, x, lv)
  local gd = guaranteed(c, g, pl, sh, backed, chained, height, x)
  local borrowed = x - gd
  if x > 0 then
    if pl.cal then
      if borrowed > 0 and free(p, pl) < borrowed then return false, wait(p, pl, 0) end
    elseif borrowed > 0 and p.lv < x then
      local gw = MAXWAIT
      if g * sh.sqps > 0 and x <= g * sh.sburst then gw = ceilns((x - c.gl) / (g * sh.sqps)) end
      return false, math.min(wait(p, pl, x), gw)
    else
      local floor = (height + 1) * pl.burst
      if borrowed <= 0 and p.lv - x < -floor - slack then return false, wait(p, pl, x - floor) end
    end
  end
  c.gl = c.gl - gd
  if pl.cal then c.gu = c.gu + gd end
  spend(p, pl, x, gd)
  lv.g, lv.b = gd, borrowed
  return true, 0
end

local function decide(x)
  local S, lv = {}, {}
  for i = 1, depth do
    local s0, l = S0[i], L[i]
    local s = {at = s0.at, lv = s0.lv, rs = s0.rs, gat = s0.gat, gl = s0.gl, gu = s0.gu}
    if not l.cal then
      s.at, s.lv = refill(s.at, s.lv, l.qps, l.burst)
    elseif s.at ~= l.wstart then
      s.at, s.lv, s.rs = l.wstart, 0, 0
    end
    S[i], lv[i] = s, {g = 0, b = 0}
  end
  local leaf = L[1]
  if x > 0 and free(S[1], leaf) < x then return S, lv, 0, wait(S[1], leaf, x) end
  spend(S[1], leaf, x, 0)
  for i = depth, 2, -1 do
    grant(S[i - 1], S[i], L[i - 1].g, L[i], L[i], L[i].backed)
  end
  for i = 2, depth do
    local chained = i > 2 and lv[i - 2].b <= 0
    local ok, w = lend(S[i - 1], S[i], L[i - 1].g, L[i], L[i], L[i - 1].backed, chained, i - 2, x, lv[i - 1])
    if not ok then return S, lv, i - 1, w end
  end
  return S, lv, -1, 0
end

local S, lv, refused, w = decide(math.max(n, 0))
local allowed = refused < 0
if allowed and n > 0 then
  for i = 1, depth do
    local s = S[i]
    redis.call('HSET', KEYS[i], 'at', s.at, 'lv', g17(s.lv), 'rs', g17(s.rs), 'gat', s.gat, 'gl', g17(s.gl), 'gu', g17(s.gu))
    redis.call('PEXPIRE', KEYS[i], L[i].ttl)
  end
elseif not allowed then
  S, lv = decide(0)
  for i = 1, depth do lv[i] = {g = 0, b = 0} end
end
local out = {0, refused, string.format('%.0f', w)}
if allowed then out[1] = 1 end
for i = 1, depth do
  local s, l = S[i], L[i]
  local used = s.lv
  if not l.cal then used = l.burst - s.lv end
  local ceiling = l.burst
  if l.cal then ceiling = l.quota end
  local a = 3 + (i - 1) * 7
  out[a + 1], out[a + 2], out[a + 3], out[a + 4] = g17(lv[i].g), g17(lv[i].b), g17(used), g17(ceiling)
  out[a + 5], out[a + 6], out[a + 7] = g17(math.max(free(s, l), 0)), g17(math.max(s.gl, 0)), g17(s.gu)
end
return out
`

// nestedLevelArgs is how many ARGV values each level takes.
const nestedLevelArgs = 12

// NestedScript is nestedLua, run by NestedSpend.
var NestedScript = redis.NewScript(nestedLua)
