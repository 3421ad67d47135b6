package cluster

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// multiLua decides one request under several cluster rules at once
// (multi_cluster.go): KEYS holds one key per rule, in the list's order, and
// ARGV five values per key: the engine ('tb' token bucket, 'sw' sliding
// window, 'cq' calendar window), its two numbers (rate and burst, window µs
// and limit, or quota and expiry as Unix ms), then min and max, as in the
// single-rule scripts (redisscript.go, cluster_calendar.go). It reads every
// key first and grants on every key only if each has at least min; else it
// grants nothing and writes nothing, so a refusal by one rule spends no
// other rule's tokens, whatever runs beside it. Per key it answers as those
// scripts do, {granted, remaining, wait µs (for 'cq' 1 when refused), reset
// µs (0 for 'cq')}: a key that refuses has a wait, the others have none
// unless they ran out by this grant. Redis Cluster runs it only when every
// key lies in one slot; the caller checks.
const multiLua = stateValidLua + `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local clock_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local vals = redis.call('MGET', unpack(KEYS))
local st, out, all = {}, {}, true
for i = 1, #KEYS do
  local r = 5 * i - 4
  local s = {kind = ARGV[r], a = tonumber(ARGV[r + 1]), b = tonumber(ARGV[r + 2]),
    min = tonumber(ARGV[r + 3]), max = tonumber(ARGV[r + 4]), now = clock}
  local v = vals[i]
  if s.kind == 'tb' then
    if v and #v ~= 16 then v = nil end
    s.tokens = s.b
    if v then
      local last
      last, s.tokens = struct.unpack('<dd', v)
      last, s.tokens = tb_valid(last, s.tokens, clock, s.b)
      if clock > last then s.tokens = s.tokens + (clock - last) * s.a / 1000000 else s.now = last end
      if s.tokens > s.b then s.tokens = s.b end
    end
    s.ok = s.tokens >= s.min
  elseif s.kind == 'sw' then
    if v and #v ~= 24 then v = nil end
    s.start = clock - (clock % s.a)
    local ws
    if v then
      ws, s.cur, s.prev = struct.unpack('<ddd', v)
      ws, s.cur, s.prev = sw_valid(ws, s.cur, s.prev, clock, s.a, s.b)
    else
      s.cur, s.prev = 0, 0
    end
    if ws and ws > s.start then s.start, s.now = ws, ws end
    if ws ~= s.start then
      if ws and s.start - ws == s.a then s.prev = s.cur else s.prev = 0 end
      s.cur = 0
    end
    s.est = s.prev * (s.a - (s.now - s.start)) / s.a + s.cur
    s.ok = s.est + s.min <= s.b
  else
    s.used = count_valid(tonumber(v), s.a)
    s.ok = s.used + s.min <= s.a
  end
  if not s.ok then all = false end
  st[i] = s
end
for i = 1, #KEYS do
  local s, o = st[i], 4 * i - 4
  local granted, left, wait, reset, v, ttl = 0, 0, 0, 0
  if s.kind == 'tb' then
    local tokens = s.tokens
    if all then
      granted = math.min(s.max, math.floor(tokens))
      tokens = tokens - granted
    end
    if tokens < s.min then wait = math.ceil((s.min - tokens) * 1000000 / s.a) end
    left, reset = math.max(0, math.floor(tokens)), math.ceil((s.b - tokens) * 1000000 / s.a)
    v = struct.pack('<dd', s.now, tokens)
    ttl = math.ceil((s.b - math.min(tokens, 0)) / s.a * 1000) + 1000
  elseif s.kind == 'sw' then
    local cur, est = s.cur, s.est
    if all then
      granted = math.min(s.max, math.floor(s.b - est))
      cur, est = cur + granted, est + granted
    end
    if est + s.min > s.b then
      local room, at = s.b - s.min - cur
      if room >= 0 and s.prev > 0 then
        at = s.start + s.a * (1 - room / s.prev)
      else
        at = s.start + s.a + s.a * (1 - (s.b - s.min) / cur)
      end
      wait = math.ceil(at - s.now)
    end
    left, reset = math.max(0, math.floor(s.b - est)), s.start + s.a - s.now
    v = struct.pack('<ddd', s.start, cur, s.prev)
    ttl = math.ceil(2 * s.a / 1000) + 1000
  else
    local used = s.used
    if all then
      granted = math.min(s.max, s.a - used)
      used = used + granted
    end
    if used + s.min > s.a then wait = 1 end
    left = math.max(0, s.a - used)
    v = string.format('%d', used)
    ttl = math.max(1000, s.b - clock_ms)
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = granted, left, wait, reset
  if all then
    local w = redis.pcall('SET', KEYS[i], v, 'PX', string.format('%d', math.min(1e15, ttl)))
    if type(w) == 'table' and w.err then out[o + 1] = w.err end
  end
end
return out
`

var multiScript = redis.NewScript(multiLua)

// parseMulti reads multiLua's reply: four values per key, as parseKeyGrant
// reads them.
func parseMulti(cmd *redis.Cmd, n int) ([]Grant, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	if len(vals) != 4*n {
		return nil, fmt.Errorf("ratelimit script: %d values for %d keys", len(vals), n)
	}
	gs := make([]Grant, n)
	for i := range gs {
		if gs[i], err = parseKeyGrant(vals[4*i : 4*i+4]); err != nil {
			return nil, err
		}
	}
	return gs, nil
}
