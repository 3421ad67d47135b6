package cluster

import "math"

// A cluster key's value of the right length may still hold numbers no
// engine wrote: NaN, ±inf, a timestamp far in the future, a count below
// zero or a debt no settlement could run up (a stray SET, a bug, a bad
// restore). Read as they are, they refuse the key until it idles out,
// which a hot key never does (its TTL is refreshed on every decision), or
// for good (-inf), and garble the usage answer. The scripts and quota
// usage check each value on read, the same way:
//
//   - a number that is not finite, a timestamp below zero, a count below
//     zero (a token bucket: a debt deeper than maxDebtQuotas × its burst)
//     or above maxDebtQuotas × the quota: the value is replaced by fresh
//     state, as one of another length is (the key's quota starts afresh
//     once);
//   - a timestamp more than stateSkew ahead of Redis's clock: the counts
//     are kept and the time is taken as now (conservative: the key refills
//     or its window moves on from now, instead of waiting for that time).
//
// Within stateSkew the scripts keep what they did: a clock that stepped
// back a little (a failover to a replica whose clock is behind) counts
// from the state's time, never granting the step twice.
const (
	stateSkewMicros = 2e6 // 2 s in µs, Redis's clock
	maxDebtQuotas   = 1e6 // no settlement runs a key this many quotas into debt
)

// stateValidLua defines the checks for the scripts, which start with it.
// NaN fails every comparison, so each check is written as what a valid
// value satisfies.
const stateValidLua = `
local function tb_valid(last, tokens, clock, burst)
  if not (last >= 0 and tokens >= -1e6 * burst and tokens <= burst * 1e6) then return clock, burst end
  if last > clock + 2e6 then return clock, tokens end
  return last, tokens
end
local function sw_valid(s, cur, prev, clock, size, limit)
  local cap = 1e6 * limit
  if not (s >= 0 and cur >= 0 and cur <= cap and prev >= 0 and prev <= cap) then return nil, 0, 0 end
  if s > clock + 2e6 then return clock - (clock % size), cur, prev end
  return s, cur, prev
end
local function count_valid(used, quota)
  if used and used >= 0 and used <= 1e6 * quota then return used end
  return 0
end
`

// ValidTokenBucket is tb_valid: last and clock in µs.
func ValidTokenBucket(last, tokens, clock, burst float64) (float64, float64, bool) {
	if !(last >= 0 && tokens >= -maxDebtQuotas*burst && tokens <= maxDebtQuotas*burst) {
		return clock, burst, false
	}
	if last > clock+stateSkewMicros {
		return clock, tokens, true
	}
	return last, tokens, true
}

// ValidWindow is sw_valid: start, clock and size in µs; ok false: fresh.
func ValidWindow(start, cur, prev, clock, size, limit float64) (float64, float64, float64, bool) {
	limit *= maxDebtQuotas
	if !(start >= 0 && cur >= 0 && cur <= limit && prev >= 0 && prev <= limit) {
		return 0, 0, 0, false
	}
	if start > clock+stateSkewMicros {
		return clock - math.Mod(clock, size), cur, prev, true
	}
	return start, cur, prev, true
}

// ValidCount is count_valid: a calendar window's count, 0 if invalid.
func ValidCount(used, quota float64) float64 {
	if used >= 0 && used <= maxDebtQuotas*quota {
		return used
	}
	return 0
}
