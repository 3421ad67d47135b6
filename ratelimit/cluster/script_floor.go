//go:build sluice_floor

package cluster

// A sluice_floor build (make bench's floor case, never a release) answers
// every exact token bucket decision with a script that reads and writes
// nothing: the batcher, the round trip and a script call per batch stay,
// Redis's work per key goes. The exact case's share of this build's
// throughput is what the token bucket itself costs on the box.
const tokenBucketSource = floorLua

// floorLua grants every key its maximum, in the reply format of
// tokenBucketLua (four values per key, runs of five ARGV).
const floorLua = `
local out, first, r = {}, 1, 1
while r < #ARGV do
 local n, want_max = tonumber(ARGV[r]), tonumber(ARGV[r + 4])
 for i = first, first + n - 1 do
  local a = 4 * i - 4
  out[a + 1], out[a + 2], out[a + 3], out[a + 4] = want_max, 0, 0, 0
 end
 first, r = first + n, r + 5
end
return out
`
