package grayroute

// Buckets is the number of buckets a bucketing key is hashed into: a weight
// has a resolution of 0.01 percentage points (one basis point).
const Buckets = 10000

// FNV-1a 64 constants. The hash must give the same bucket on every instance,
// architecture and restart, so it has no seed (unlike hash/maphash).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Bucket places a bucketing key in [0, Buckets) for a rule. The rule id salts
// the hash, so a user's bucket under one rule says nothing about another rule
// (two canaries at 10% do not get the same 10% of users).
func Bucket(ruleID string, key []byte) uint32 { return bucketFrom(idHash(ruleID), key) }

// idHash is the hash state after the rule id and its separator: the same
// for every request of a rule, so a rule computes it once (Rule.idHash).
func idHash(ruleID string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(ruleID); i++ {
		h ^= uint64(ruleID[i])
		h *= fnvPrime64
	}
	return h * fnvPrime64 // a 0 separator byte: ids never contain one
}

// bucketFrom is Bucket from the rule's idHash.
func bucketFrom(h uint64, key []byte) uint32 { return uint32(mix64(keyState(h, key)) % Buckets) }

// keyState is the FNV-1a state after key, from the rule's idHash.
func keyState(h uint64, key []byte) uint64 {
	for _, c := range key {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// mix64 is MurmurHash3's finalizer: FNV-1a alone spreads the last bytes of a
// key poorly over the low bits that the modulo keeps.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// InCanary reports whether a bucket is inside a threshold given in basis
// points (weight 20% = 2000). A bucket in the canary at a threshold stays in
// it at every higher threshold, so raising a weight never moves a canary
// user back.
func InCanary(bucket, threshold uint32) bool { return bucket < threshold }
