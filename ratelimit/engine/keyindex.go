package engine

import "math/bits"

// keyIndex finds a shard's entries by their key's 64-bit hash: open
// addressing with linear probing over one slice of slots, each the hash's
// high 32 bits (its tag) over the entry's index, 0 when empty. A lookup
// reads one or two adjacent slots, mostly in one cache line, where a Go map
// reads its header, directory, table and group. Keys of equal hashes take
// a slot each; the caller tells them apart by their bytes. It holds no
// pointers.
type keyIndex struct {
	slots []uint64
	n     int  // slots in use
	shift uint // 64 - log2(len(slots)): a hash's home slot is h >> shift
}

// minSlots is the smallest index made: a shard's first keys.
const minSlots = 8

// start returns the probe position of hash h: its home slot.
func (x *keyIndex) start(h uint64) int { return int(h >> x.shift) }

// candidate returns the first entry index from probe position p on whose
// slot carries h's tag, with the position after it; 0 at the end of h's
// probe run (an empty slot) or when the index is empty.
func (x *keyIndex) candidate(h uint64, p int) (int32, int) {
	if x.n == 0 {
		return 0, 0
	}
	mask := len(x.slots) - 1
	tag := h >> 32
	for ; ; p = (p + 1) & mask {
		v := x.slots[p]
		if v == 0 {
			return 0, p
		}
		if v>>32 == tag {
			return int32(uint32(v)), (p + 1) & mask
		}
	}
}

// insert adds entry i (not 0) under hash h, growing the slots to keep at
// most three in four used.
func (x *keyIndex) insert(h uint64, i int32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.place(h>>32<<32 | uint64(uint32(i)))
	x.n++
}

// place puts slot value v at the first empty slot of its probe run.
func (x *keyIndex) place(v uint64) {
	mask := len(x.slots) - 1
	p := int(v >> 32 << 32 >> x.shift)
	for x.slots[p] != 0 {
		p = (p + 1) & mask
	}
	x.slots[p] = v
}

func (x *keyIndex) grow() {
	old := x.slots
	n := max(minSlots, 2*len(old))
	x.slots = make([]uint64, n)
	x.shift = uint(64 - bits.TrailingZeros(uint(n)))
	for _, v := range old {
		if v != 0 {
			x.place(v)
		}
	}
}

// remove drops entry i, indexed under hash h, shifting later slots of the
// probe run back so that no lookup meets a hole before its key.
func (x *keyIndex) remove(h uint64, i int32) {
	mask := len(x.slots) - 1
	want := h>>32<<32 | uint64(uint32(i))
	p := x.start(h)
	for x.slots[p] != want {
		p = (p + 1) & mask
	}
	for q := (p + 1) & mask; ; q = (q + 1) & mask {
		v := x.slots[q]
		if v == 0 {
			break
		}
		// v may move to the hole at p unless its home lies cyclically
		// in (p, q]: then it would be placed before its home.
		home := int(v >> 32 << 32 >> x.shift)
		if (q-home)&mask >= (q-p)&mask {
			x.slots[p] = v
			p = q
		}
	}
	x.slots[p] = 0
	x.n--
}
