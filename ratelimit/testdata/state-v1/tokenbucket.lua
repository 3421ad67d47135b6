-- The previous release's token bucket script, verbatim: the constant tokenBucketLua of
-- ratelimit/redisscript.go at db7c664db2e92e4af18924df95531b7fcd30fd54 (1f9b4eb^,
-- the last commit before the packed-string state). Its state is a hash at
-- <prefix>ratelimit:tb:{<rule-id>:<key>}. Used by cluster_upgrade_test.go to play an
-- instance of that release beside this one. Everything below this header is
-- the constant's text unchanged (git show db7c664:ratelimit/redisscript.go).

local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out, first, r = {}, 1, 1
while r < #ARGV do
 local n = tonumber(ARGV[r])
 local rate, burst = tonumber(ARGV[r + 1]), tonumber(ARGV[r + 2])
 local want_min, want_max = tonumber(ARGV[r + 3]), tonumber(ARGV[r + 4])
 local ttl = math.min(1e15, math.ceil(burst / rate * 1000) + 1000)
 for i = first, first + n - 1 do
  local key, a = KEYS[i], 4 * i - 4
  local v = redis.pcall('HMGET', key, 't', 'n')
  if v.err then
    out[a + 1], out[a + 2], out[a + 3], out[a + 4] = v.err, 0, 0, 0
  else
    local now = clock
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
    local w = redis.pcall('HSET', key, 't', now, 'n', tokens)
    if type(w) == 'table' and w.err then
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = w.err, 0, 0, 0
    else
      redis.pcall('PEXPIRE', key, ttl)
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = granted, math.floor(tokens), wait,
        math.ceil((burst - tokens) * 1000000 / rate)
    end
  end
 end
 first, r = first + n, r + 5
end
return out
