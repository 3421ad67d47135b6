-- wrk script: every request from one of 10,000 users picked at random, so
-- a rate-limit rule keyed by user tracks 10,000 keys.
local users = {}
for i = 1, 10000 do
	users[i] = { ["X-User-Id"] = "user" .. i }
end

init = function()
	-- each wrk thread has its own Lua state: seed each differently
	math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
end

request = function()
	return wrk.format("GET", "/", users[math.random(10000)])
end
