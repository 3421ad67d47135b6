//go:build race

package overload

// raceOn: the race detector slows the single-threaded simulation about
// tenfold, so a -race run checks fewer seeds; `make test` also runs this
// package without it, with every seed.
const raceOn = true
