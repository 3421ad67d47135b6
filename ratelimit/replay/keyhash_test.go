package replay

import (
	"math/bits"
	"strconv"
	"testing"
)

// The hash spreads keys evenly over shards, samples and name slots, and
// one flipped input bit changes about half the output bits.
func TestKeyHashSpreads(t *testing.T) {
	const n = 1 << 16
	var shards [Shards]int
	var low [16]int
	flips := 0
	for i := range n {
		k := []byte("user:" + strconv.Itoa(i))
		h := keyHash(k)
		shards[h>>(64-3)]++
		low[h&15]++
		k[len(k)-1] ^= 1
		flips += bits.OnesCount64(h ^ keyHash(k))
	}
	for i, c := range shards {
		if c < n/Shards*9/10 || c > n/Shards*11/10 {
			t.Errorf("shard %d holds %d of %d keys", i, c, n)
		}
	}
	for i, c := range low {
		if c < n/16*9/10 || c > n/16*11/10 {
			t.Errorf("low bits %d: %d of %d keys", i, c, n)
		}
	}
	if avg := float64(flips) / n; avg < 30 || avg > 34 {
		t.Errorf("a flipped bit changes %.1f output bits on average, want about 32", avg)
	}
	if keyHash([]byte("user:42")) != keyHash([]byte("user:42")) || keyHash(nil) == keyHash([]byte{0}) {
		t.Error("the hash is not a function of the key and its length")
	}
}
