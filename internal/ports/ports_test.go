package ports

import "testing"

// Ports handed out lie outside the kernel's ephemeral range (where
// httptest servers and outgoing connections get theirs), are never handed
// out twice, and a pair keeps its offset.
func TestFreeStaysOutOfTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		p := Free(t)
		if p >= lo && p <= hi || p < lowest || p > 65535 {
			t.Fatalf("port %d inside the ephemeral range %d-%d or out of bounds", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	for i := 0; i < 50; i++ {
		p := FreeWithOffset(t, 10000)
		for _, q := range []int{p, p + 10000} {
			if q >= lo && q <= hi || q > 65535 || seen[q] {
				t.Fatalf("pair port %d: in the ephemeral range, out of bounds or handed out twice", q)
			}
			seen[q] = true
		}
	}
}
