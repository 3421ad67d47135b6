-- The previous release's sliding window script, verbatim: the constant slidingWindowLua of
-- ratelimit/redisscript.go at db7c664db2e92e4af18924df95531b7fcd30fd54 (1f9b4eb^,
-- the last commit before the packed-string state). Its state is a hash at
-- <prefix>ratelimit:sw:{<rule-id>:<key>}. Used by cluster_upgrade_test.go to play an
-- instance of that release beside this one. Everything below this header is
-- the constant's text unchanged (git show db7c664:ratelimit/redisscript.go).

local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out, first, r = {}, 1, 1
while r < #ARGV do
 local n = tonumber(ARGV[r])
 local size, limit = tonumber(ARGV[r + 1]), tonumber(ARGV[r + 2])
 local want_min, want_max = tonumber(ARGV[r + 3]), tonumber(ARGV[r + 4])
 local ttl = math.min(1e15, math.ceil(2 * size / 1000) + 1000)
 for i = first, first + n - 1 do
  local key, a = KEYS[i], 4 * i - 4
  local v = redis.pcall('HMGET', key, 's', 'c', 'p')
  if v.err then
    out[a + 1], out[a + 2], out[a + 3], out[a + 4] = v.err, 0, 0, 0
  else
    local now = clock
    local start = now - (now % size)
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
    local w = redis.pcall('HSET', key, 's', start, 'c', cur, 'p', prev)
    if type(w) == 'table' and w.err then
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = w.err, 0, 0, 0
    else
      redis.pcall('PEXPIRE', key, ttl)
      out[a + 1], out[a + 2], out[a + 3], out[a + 4] = granted, math.max(0, math.floor(limit - est)), wait,
        start + size - now
    end
  end
 end
 first, r = first + n, r + 5
end
return out
