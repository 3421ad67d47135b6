-- The previous release's pace script, verbatim: the constant paceLua of
-- ratelimit/cluster_pace_script.go at db7c664db2e92e4af18924df95531b7fcd30fd54
-- (1f9b4eb^). Its state is a hash {p} at <prefix>ratelimit:pc:{<rule-id>:<key>},
-- the same name and format as this build's. Used by cluster_upgrade_test.go.
-- Everything below this header is the constant's text unchanged
-- (git show db7c664:ratelimit/cluster_pace_script.go).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local max_wait = tonumber(ARGV[2])
local tat = tonumber(redis.call('HGET', KEYS[1], 'p')) or now
if tat < now then tat = now end
local wait = tat - now
if wait > max_wait then
  return {0, 0, math.ceil(wait - max_wait), math.ceil(wait)}
end
tat = tat + interval
redis.call('HSET', KEYS[1], 'p', string.format('%.3f', tat))
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.ceil((tat - now) / 1000) + 1000))
local remaining = 0
if now + max_wait >= tat then remaining = math.floor((now + max_wait - tat) / interval) + 1 end
return {1, remaining, math.ceil(wait), math.ceil(tat - now)}
