package engine

import "math"

// bucket is the Spec the rule parser makes of a token bucket rule with
// qps, burst (0: ceil(qps)) and max_keys (0: the default), cost 1.
func bucket(qps, burst float64, maxKeys int) *Spec {
	if burst == 0 {
		burst = math.Ceil(qps)
	}
	if maxKeys == 0 {
		maxKeys = 100_000
	}
	r := &Spec{Type: TokenBucket, Cost: 1, MaxKeys: maxKeys, Limits: Limits{QPS: qps, Burst: burst}}
	r.Limits.Quota = int64(r.Limits.Burst)
	r.Idle = r.Limits.Idle(TokenBucket)
	return r
}
