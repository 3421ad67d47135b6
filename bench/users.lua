-- wrk script: every request from one of 10,000 users, so a rate-limit rule
-- keyed by user tracks 10,000 keys.
local counter = 0
request = function()
	counter = counter + 1
	return wrk.format("GET", "/", { ["X-User-Id"] = "user" .. (counter % 10000) })
end
