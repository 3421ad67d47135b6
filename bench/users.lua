-- wrk script: requests from BENCH_KEYS users (default 10,000), each with
-- its own X-User-Id, so a rate-limit rule keyed by user tracks that many
-- keys. The requests are built once per thread, in a shuffled order, and
-- sent in turn: wrk spends no time formatting a request while it measures
-- (formatting each one took CPU from Caddy on the shared cores).
local keys = tonumber(os.getenv("BENCH_KEYS") or "") or 10000
local reqs, i = {}, 0

init = function()
	-- each wrk thread has its own Lua state: seed each differently
	math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
	for k = 1, keys do
		reqs[k] = wrk.format("GET", "/", { ["X-User-Id"] = "user" .. k })
	end
	for k = keys, 2, -1 do
		local j = math.random(k)
		reqs[k], reqs[j] = reqs[j], reqs[k]
	end
end

request = function()
	i = i % keys + 1
	return reqs[i]
end
