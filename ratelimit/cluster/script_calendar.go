package cluster

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A calendar quota with scope cluster counts each key's window in its own
// Redis string, named with the window's start (calendarRedisKey), holding
// the units spent in it. Redis has no time zone data, so the instance
// decides which window a request falls in, by its own clock, and names
// that window's key; near a boundary, instances whose clocks disagree by
// a few ms count a request in one window or the other, never in both.
// Each key expires redisKeyMargin after its window ends (PX from Redis's
// TIME to that instant), leaving late clocks time to finish counting.
//
// calendarLua runs like the other decision scripts over many keys
// (redisscript.go): ARGV runs of five values, {n keys, quota, expire at
// (Unix ms), min, max}; it grants as many units as are left up to max if
// at least min are. Per key it returns {granted, remaining, refused (1
// when fewer than min are left after the grant), 0}: the times come from
// the instance, which knows where the window ends (calendarGrant). A value
// that is not a number (damaged, or another type) counts as none and is
// replaced.
const calendarLua = stateValidLua + `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local vals = redis.call('MGET', unpack(KEYS))
local seen, out, first, r = {}, {}, 1, 1
while r < #ARGV do
 local n = tonumber(ARGV[r])
 local quota, expire_at = tonumber(ARGV[r + 1]), tonumber(ARGV[r + 2])
 local want_min, want_max = tonumber(ARGV[r + 3]), tonumber(ARGV[r + 4])
 local ttl = string.format('%d', math.max(1000, expire_at - clock))
 for i = first, first + n - 1 do
  local key, a = KEYS[i], 4 * i - 4
  local v = seen[key]
  if v == nil then v = vals[i] end
  local used = count_valid(tonumber(v), quota)
  local granted, refused = 0, 0
  if used + want_min <= quota then
    granted = math.min(want_max, quota - used)
    used = used + granted
  end
  if used + want_min > quota then refused = 1 end
  v = string.format('%d', used)
  local w = redis.pcall('SET', key, v, 'PX', ttl)
  if type(w) == 'table' and w.err then
    out[a + 1], out[a + 2], out[a + 3], out[a + 4] = w.err, 0, 0, 0
  else
    seen[key] = v
    out[a + 1], out[a + 2], out[a + 3], out[a + 4] = granted, math.max(0, quota - used), refused, 0
  end
 end
 first, r = first + n, r + 5
end
return out
`

// calendarSettleLua charges a settlement (ARGV[1] units, negative for a
// refund) to one window's key, down to none, with the key's expiry
// (ARGV[2], Unix ms); it answers like a decision, {0, used, debt, 0}, debt
// 1 when this charge took the count over the quota ARGV[3] from at or
// under it.
const calendarSettleLua = stateValidLua + `
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local quota = tonumber(ARGV[3])
local before = count_valid(tonumber(redis.call('GET', KEYS[1])), quota)
local used = math.max(0, before + tonumber(ARGV[1]))
redis.call('SET', KEYS[1], string.format('%d', used), 'PX', string.format('%d', math.max(1000, tonumber(ARGV[2]) - clock)))
local debt = 0
if before <= quota and used > quota then debt = 1 end
return {0, used, debt, 0}
`

var (
	CalendarScript       = redis.NewScript(calendarLua)
	CalendarSettleScript = redis.NewScript(calendarSettleLua)
)

// CalendarRedisKey names a key's count in one calendar window:
//
//	<prefix>ratelimit:cq:{<rule-id>:<key>}:<window start, Unix s>
//
// The hash tag keeps every window of a key in one Redis Cluster slot.
func CalendarRedisKey(prefix, id string, key []byte, start int64) string {
	b := make([]byte, 0, len(prefix)+len("ratelimit:cq:{:}:")+len(id)+len(key)+12)
	b = append(b, prefix...)
	b = append(b, "ratelimit:cq:{"...)
	b = append(b, id...)
	b = append(b, ':')
	b = append(b, key...)
	b = append(b, "}:"...)
	b = strconv.AppendInt(b, start/1e9, 10)
	return string(b)
}
