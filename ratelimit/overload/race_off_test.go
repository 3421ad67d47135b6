//go:build !race

package overload

const raceOn = false
