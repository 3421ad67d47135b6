//go:build !sluice_floor

package cluster

// tokenBucketSource is the token bucket script Redis runs; a build with the
// sluice_floor tag swaps in floorLua (script_floor.go).
const tokenBucketSource = tokenBucketLua
