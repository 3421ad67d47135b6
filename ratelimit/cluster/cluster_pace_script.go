package cluster

import "github.com/redis/go-redis/v9"

// paceLua spaces a cluster rule's admissions fleet-wide (control_behavior
// pace with scope cluster): the same virtual scheduling as the local pacer
// (engine/pace.go), with the schedule in Redis and Redis's own TIME as the clock,
// so the instances' clocks do not matter.
//
// KEYS[1] hash {p = the next free slot, µs of Redis time}; ARGV interval µs
// (cost/qps, fractional), max_queue_wait µs. The slot is max(p, now). If it
// lies within max_queue_wait the script reserves it (p moves one interval
// on) and returns {1, remaining, wait µs until the slot, reset µs until the
// schedule is free again}; else it reserves nothing and returns {0, 0,
// retry µs (until a slot within max_queue_wait, with no other request
// meanwhile), wait µs until the slot}. remaining is how many more slots
// lie within max_queue_wait now. The key lives until its schedule is free
// plus a second. A key that is not such a hash (damaged, or written by
// something else) is replaced by a fresh schedule.
const paceLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local max_wait = tonumber(ARGV[2])
local ok, p = pcall(redis.call, 'HGET', KEYS[1], 'p')
if not ok then redis.call('DEL', KEYS[1]) p = nil end
local tat = tonumber(p) or now
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
`

var paceScript = redis.NewScript(paceLua)
