package replay

import (
	"encoding/binary"
	"math/bits"
)

// keyHash is a key's 64-bit hash. It is fixed, not seeded per process, so
// every instance hashes a key alike: their samples keep the same keys and
// their answers name an unnamed key by the same hash. (A client choosing
// its keys can choose which are sampled: a preview is an estimate, not a
// control.) Words are folded in by a 64×64→128-bit multiply (as wyhash
// does), and a last multiply spreads every input bit over the result,
// whose top bits pick the shard, low bits the sample and middle bits the
// name slot.
func keyHash(b []byte) uint64 {
	h := uint64(len(b)) ^ 0x9e3779b97f4a7c15
	for len(b) >= 8 {
		h = fold(h^binary.LittleEndian.Uint64(b), 0xa0761d6478bd642f)
		b = b[8:]
	}
	if len(b) > 0 {
		var tail [8]byte
		copy(tail[:], b)
		h = fold(h^binary.LittleEndian.Uint64(tail[:]), 0xe7037ed1a0b428db)
	}
	return fold(h^0x8ebc6af09c88c6e3, 0x589965cc75374cc3)
}

func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
