package grayroute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/rulestore"
)

// The fleet's analysis in Redis: one hash per canary (rule, versions,
// interval length) holds
//
//	i:<instance>  the instance's counts since it began counting this canary
//	              (absolute, cumulative), prefixed by the last interval they
//	              cover. A write replaces an older one and never a newer one,
//	              so a retried or late write cannot add twice, and a missed
//	              one heals at the instance's next write.
//	s:<interval>  the interval's sealed counts: every instance's counts as
//	              they stood when the first instance to judge the interval
//	              found every live instance had reported it, or the wait
//	              for them timed out. Sealed once, read by every instance.
//	a             the fleet's analysis after the last judged interval, with
//	              that interval's verdict, written by compare-and-set.
//
// Judging interval i: if a already covers i, the instance adopts it (the
// verdict another instance computed); otherwise it computes i from a and
// the counts s:i adds to those a has taken in, and writes a only if a is
// still the one it read. Computing is a pure function of what Redis holds,
// so every instance shows the same totals and verdict for every interval.

// fleetLiveIntervals: an instance that reported one of the last this many
// intervals is live, and an interval waits for its report (up to a
// quarter interval past its due time).
const fleetLiveIntervals = 2

// fleetKeepSeals is how many intervals' sealed counts a hash keeps for
// instances that judge late.
const fleetKeepSeals = 30

// fleetKey is the Redis hash of one canary's fleet analysis.
func fleetKey(store *rulestore.App, c *canary) string {
	return store.KeyPrefix() + "gray_analysis:" + c.rule + ":" + c.target + ":" + c.fallback + ":" +
		strconv.FormatInt(c.interval.Milliseconds(), 10)
}

// fleetTTL keeps a canary's hash while any instance still writes it.
func fleetTTL(c *canary) time.Duration { return 20*c.interval + time.Minute }

// reportScript writes an instance's cumulative counts unless a newer write
// is already there. KEYS[1] hash; ARGV field, interval, value, ttl (ms).
var reportScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
	local ci = tonumber(string.match(cur, '^(%-?%d+)'))
	if ci and ci > tonumber(ARGV[2]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// beginScript returns {a, s:i} for judging interval i, sealing s:i if it
// is not yet (s:i is "" when a already covers i), or nil when a live
// instance has not reported i and the wait has not timed out. KEYS[1]
// hash; ARGV interval, timed out (1/0), live intervals, kept seals, ttl.
var beginScript = redis.NewScript(`
local idx = tonumber(ARGV[1])
local a = redis.call('HGET', KEYS[1], 'a') or ''
if a ~= '' then
	local ai = tonumber(string.match(a, '^(%-?%d+)'))
	if ai and ai >= idx then return {a, ''} end
end
local s = redis.call('HGET', KEYS[1], 's:' .. ARGV[1])
if s then return {a, s} end
local all = redis.call('HGETALL', KEYS[1])
local parts, missing = {}, 0
for k = 1, #all, 2 do
	local f, v = all[k], all[k + 1]
	local kind = string.sub(f, 1, 2)
	if kind == 'i:' then
		local vi = tonumber(string.match(v, '^(%-?%d+)')) or 0
		if vi < idx and vi >= idx - tonumber(ARGV[3]) then missing = missing + 1 end
		parts[#parts + 1] = string.sub(f, 3) .. ' ' .. v
	elseif kind == 's:' then
		local si = tonumber(string.sub(f, 3))
		if si and si < idx - tonumber(ARGV[4]) then redis.call('HDEL', KEYS[1], f) end
	end
end
if missing > 0 and ARGV[2] ~= '1' then return false end
s = missing .. '\n' .. table.concat(parts, '\n')
redis.call('HSET', KEYS[1], 's:' .. ARGV[1], s)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {a, s}
`)

// commitScript writes a if it still covers the interval it was read at
// ("" for none). KEYS[1] hash; ARGV prior interval, value, ttl.
var commitScript = redis.NewScript(`
local a = redis.call('HGET', KEYS[1], 'a')
local ai = ''
if a then ai = string.match(a, '^(%-?%d+)') or '' end
if ai ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'a', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// errNotReady: a live instance has not reported the interval yet.
var errNotReady = errors.New("a live instance has not reported the interval yet")

// fleetState is the a field: the fleet's analysis after interval Interval.
type fleetState struct {
	Interval int64 `json:"-"`
	// Taken are the fleet's counts the analysis has taken in (the sums of
	// the instances' cumulative counts in the last seal).
	Taken    [2]VersionCounts `json:"taken"`
	Analysis analysisSnapshot `json:"analysis"`
	// Start is the interval this analysis started at.
	Start     int64          `json:"start"`
	Action    Action         `json:"action"`
	NewWeight uint32         `json:"new_weight"`
	Report    IntervalReport `json:"report"`
}

// encodeCounts writes cumulative counts covering interval idx: the
// interval, cn ce bn be, then the non-zero latency buckets as c<j>=n and
// b<j>=n.
func encodeCounts(idx int64, cum *[2]VersionCounts) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(idx, 10))
	for _, v := range cum {
		fmt.Fprintf(&b, " %d %d", v.Requests, v.Errors)
	}
	for side, v := range cum {
		for j, n := range v.Latency {
			if n > 0 {
				fmt.Fprintf(&b, " %c%d=%d", "cb"[side], j, n)
			}
		}
	}
	return b.String()
}

// decodeCounts parses encodeCounts' output.
func decodeCounts(s string) (idx int64, cum [2]VersionCounts, err error) {
	f := strings.Fields(s)
	if len(f) < 5 {
		return 0, cum, fmt.Errorf("fleet counts %q: too short", s)
	}
	if idx, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return 0, cum, err
	}
	var n [4]uint64
	for i := range n {
		if n[i], err = strconv.ParseUint(f[1+i], 10, 64); err != nil {
			return 0, cum, err
		}
	}
	cum[0].Requests, cum[0].Errors, cum[1].Requests, cum[1].Errors = n[0], n[1], n[2], n[3]
	for _, kv := range f[5:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(k) < 2 || (k[0] != 'c' && k[0] != 'b') {
			return 0, cum, fmt.Errorf("fleet counts: bad bucket %q", kv)
		}
		j, err1 := strconv.Atoi(k[1:])
		c, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil || j < 0 || j >= NumLatencyBuckets {
			return 0, cum, fmt.Errorf("fleet counts: bad bucket %q", kv)
		}
		side := 0
		if k[0] == 'b' {
			side = 1
		}
		cum[side].Latency[j] = c
	}
	return idx, cum, nil
}

// seal is an interval's sealed counts: the fleet's sums, the instances in
// them, and how many live instances had not reported the interval.
type seal struct {
	sum       [2]VersionCounts
	instances int
	missing   int
}

func parseSeal(s string) (seal, error) {
	var out seal
	head, rest, _ := strings.Cut(s, "\n")
	m, err := strconv.Atoi(head)
	if err != nil {
		return out, fmt.Errorf("sealed counts: %w", err)
	}
	out.missing = m
	for _, line := range strings.Split(rest, "\n") {
		_, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		_, cum, err := decodeCounts(v)
		if err != nil {
			return out, err
		}
		out.instances++
		out.sum[0].add(&cum[0])
		out.sum[1].add(&cum[1])
	}
	return out, nil
}

// since is what cur counts beyond base (never below zero: a hash that
// expired and came back starts again).
func since(cur, base *VersionCounts) (d VersionCounts) {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	d.Requests, d.Errors = sub(cur.Requests, base.Requests), sub(cur.Errors, base.Errors)
	for j := range d.Latency {
		d.Latency[j] = sub(cur.Latency[j], base.Latency[j])
	}
	return d
}

// reportCounts writes this instance's cumulative counts covering interval
// idx into the canary's hash.
func reportCounts(ctx context.Context, client redis.UniversalClient, key, instance string, idx int64, cum *[2]VersionCounts, ttl time.Duration) error {
	return reportScript.Run(ctx, client, []string{key}, "i:"+instance, idx, encodeCounts(idx, cum), ttl.Milliseconds()).Err()
}

// beginJudging returns the fleet's analysis state before interval idx
// (nil when none) and, unless that state already covers idx, the
// interval's sealed counts.
func beginJudging(ctx context.Context, client redis.UniversalClient, key string, idx int64, timedOut bool, ttl time.Duration) (*fleetState, *seal, error) {
	force := 0
	if timedOut {
		force = 1
	}
	res, err := beginScript.Run(ctx, client, []string{key}, idx, force, fleetLiveIntervals, fleetKeepSeals, ttl.Milliseconds()).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, nil, errNotReady
	}
	if err != nil {
		return nil, nil, err
	}
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("fleet analysis: %d replies, want 2", len(res))
	}
	var st *fleetState
	if res[0] != "" {
		head, body, _ := strings.Cut(res[0], " ")
		st = &fleetState{}
		if st.Interval, err = strconv.ParseInt(head, 10, 64); err != nil {
			return nil, nil, fmt.Errorf("fleet analysis state: %w", err)
		}
		if err := json.Unmarshal([]byte(body), st); err != nil {
			return nil, nil, fmt.Errorf("fleet analysis state: %w", err)
		}
	}
	if res[1] == "" {
		return st, nil, nil
	}
	s, err := parseSeal(res[1])
	if err != nil {
		return nil, nil, err
	}
	return st, &s, nil
}

// commitJudged writes the fleet's analysis after interval st.Interval,
// if the state before it is still prior (-1 for none); false when another
// instance wrote first.
func commitJudged(ctx context.Context, client redis.UniversalClient, key string, prior int64, st *fleetState, ttl time.Duration) (bool, error) {
	body, err := json.Marshal(st)
	if err != nil {
		return false, err
	}
	p := ""
	if prior >= 0 {
		p = strconv.FormatInt(prior, 10)
	}
	n, err := commitScript.Run(ctx, client, []string{key}, p, strconv.FormatInt(st.Interval, 10)+" "+string(body), ttl.Milliseconds()).Int()
	return n == 1, err
}

// finite keeps a percentile beyond the last bucket (+Inf) encodable.
func finite(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return math.MaxFloat64
	}
	return x
}
