//go:build race

package replay

// raceOn: the race detector makes each decision many times dearer, so the
// generated traffic is half as large (the replay is exact at any size).
const raceOn = true
