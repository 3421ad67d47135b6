package grayroute

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"
)

// The hash is part of the contract: changing it moves users between versions
// on upgrade. These values pin it on every architecture.
func TestBucketIsStable(t *testing.T) {
	for _, c := range []struct {
		rule, key string
		want      uint32
	}{
		{"checkout-v2", "user:alice", 5749},
		{"checkout-v2", "user:bob", 3981},
		{"r1", "ip:203.0.113.7", 7426},
		{"r1", "", 1407},
	} {
		if got := Bucket(c.rule, []byte(c.key)); got != c.want {
			t.Errorf("Bucket(%q,%q) = %d, want %d", c.rule, c.key, got, c.want)
		}
		// Same as the standard library's FNV-1a over id, 0, key.
		h := fnv.New64a()
		h.Write([]byte(c.rule + "\x00" + c.key))
		if got := uint32(mix64(h.Sum64()) % Buckets); got != c.want {
			t.Errorf("hash/fnv reference gives %d, want %d", got, c.want)
		}
	}
}

func TestBucketWeightAccuracy(t *testing.T) {
	for _, weight := range []uint32{1, 10, 20, 50, 90} {
		in := 0
		const users = 10000
		for i := 0; i < users; i++ {
			if InCanary(Bucket("checkout", fmt.Appendf(nil, "user:%d", i)), weight*100) {
				in++
			}
		}
		share := float64(in) * 100 / users
		if math.Abs(share-float64(weight)) > 2 {
			t.Errorf("weight %d%%: %.2f%% of %d users in the canary, want within ±2 points", weight, share, users)
		}
	}
}

func TestBucketSaltedByRule(t *testing.T) {
	// Two 10% canaries should not pick the same users.
	both := 0
	for i := 0; i < 10000; i++ {
		k := fmt.Appendf(nil, "user:%d", i)
		if Bucket("a", k) < 1000 && Bucket("b", k) < 1000 {
			both++
		}
	}
	if both > 200 { // independent: ~100
		t.Errorf("%d users in both 10%% canaries; rule id does not salt the hash", both)
	}
}

func TestRaisingWeightNeverMovesCanaryUserBack(t *testing.T) {
	for i := 0; i < 5000; i++ {
		b := Bucket("r", fmt.Appendf(nil, "user:%d", i))
		was := false
		for w := uint32(0); w <= Buckets; w += 500 {
			now := InCanary(b, w)
			if was && !now {
				t.Fatalf("user %d left the canary when the weight rose to %d bp", i, w)
			}
			was = now
		}
	}
}

func BenchmarkBucket(b *testing.B) {
	key := []byte("user:1234567890")
	b.ReportAllocs()
	for b.Loop() {
		Bucket("checkout-v2", key)
	}
}
