package engine

// evictSketch is what one stripe of a key table remembers of the keys it
// evicted with part of their quota spent, so that such a key, coming back,
// starts from no less than it left with. It is a count-min sketch with
// conservative update: sketchRows rows of cells, each row indexed by its
// own slice of the key's hash; an eviction merges the key's trace into its
// cell of every row, keeping the larger (a cell holds the most that any key
// hashing there left), and a lookup takes the least of the key's cells.
// Each of those cells is at least the key's own trace, so the lookup can
// over-count (another key shared all its cells) but never under-count.
//
// A trace is a uint64 that stays correct as time passes, so the sketch
// needs no ageing; 0 is no trace. Two kinds:
//
//   - traceMax: a larger value is more spent, and the merge is max (a
//     token bucket's time at which it is full again; a calendar quota's
//     window start << 32 | units used in it).
//   - traceWindow: a sliding window's index << 32 | the estimate it held;
//     see mergeWindow.
//
// The sketch is plain Go; the caller holds the stripe's lock. It is
// allocated on the stripe's first eviction that leaves a trace: a table
// that never evicts a spent key never holds one.
type evictSketch struct {
	cells []uint64 // sketchRows rows of mask+1 cells
	mask  uint64
}

const (
	sketchRows = 4
	// A row's cells are the stripe's max_keys share over 2, rounded up
	// to a power of two, from sketchMinWidth to sketchMaxWidth (a row's
	// index is 16 bits of the hash): the four rows take at most 32 bytes
	// per key of max_keys (2 MiB at the default 100,000).
	sketchMinWidth = 16
	sketchMaxWidth = 1 << 16
)

type traceKind uint8

const (
	traceMax traceKind = iota
	traceWindow
)

// sketchWidth is the cells per row for a stripe holding perShard keys.
func sketchWidth(perShard int) int {
	w := sketchMinWidth
	for w < sketchMaxWidth && w*2 < perShard {
		w *= 2
	}
	return w
}

// sketchBytes is the memory a stripe's sketch takes once made.
func sketchBytes(perShard int) int { return sketchRows * sketchWidth(perShard) * 8 }

// spread mixes the key's table hash (whose low bits pick its stripe, so
// are the same for every key of the stripe) into 64 fresh bits, 16 per row.
func spread(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// cell is the index in cells of row's cell for a key of spread hash x.
func (k *evictSketch) cell(x uint64, row int) int {
	return row*int(k.mask+1) + int(x>>(16*row)&k.mask)
}

// add merges trace v (not 0) of a key of table hash h, making the sketch
// for a stripe of perShard keys if it has none yet.
func (k *evictSketch) add(h, v uint64, kind traceKind, perShard int) {
	if k.cells == nil {
		w := sketchWidth(perShard)
		k.cells, k.mask = make([]uint64, sketchRows*w), uint64(w-1)
	}
	x := spread(h)
	for row := range sketchRows {
		c := &k.cells[k.cell(x, row)]
		if kind == traceWindow {
			*c = mergeWindow(*c, v)
		} else {
			*c = max(*c, v)
		}
	}
}

// rows returns the key's cell of every row (all 0 without a sketch).
func (k *evictSketch) rows(h uint64) (r [sketchRows]uint64) {
	if k.cells == nil {
		return r
	}
	x := spread(h)
	for row := range sketchRows {
		r[row] = k.cells[k.cell(x, row)]
	}
	return r
}

// least is the least of a key's cells of kind traceMax: its trace, or
// more.
func least(r [sketchRows]uint64) uint64 {
	m := r[0]
	for _, v := range r[1:] {
		m = min(m, v)
	}
	return m
}

// packTrace packs a window (or period) number and a whole amount, clamped
// to 32 bits each: a trace of 0 units is none.
func packTrace(window uint32, units float64) uint64 {
	u := uint64(min(units, 1<<32-1))
	if float64(u) < units {
		u++ // rounded up: a trace never holds less than was spent
	}
	if u == 0 {
		return 0
	}
	return uint64(window)<<32 | u
}

func unpackTrace(v uint64) (window uint32, units float64) {
	return uint32(v >> 32), float64(uint32(v))
}

// windowsAfter is how many windows b is after a (negative: before), as
// serial numbers so that an index that wrapped 32 bits still compares.
func windowsAfter(a, b uint32) int32 { return int32(b - a) }

// mergeWindow merges two sliding-window traces. A trace (j, e) restores as
// the estimate e counted in window j: at most e while j lasts, and what
// slides out of it during window j+1. Two traces of windows at most one
// apart merge into (the later window, the larger estimate), which counts
// at least what either does at any time; a trace two or more windows older
// than the other counts nothing by then, and goes.
func mergeWindow(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return a | b
	}
	ja, ea := unpackTrace(a)
	jb, eb := unpackTrace(b)
	switch d := windowsAfter(ja, jb); {
	case d > 1:
		return b
	case d < -1:
		return a
	case d < 0:
		jb = ja
	}
	return packTrace(jb, max(ea, eb))
}
