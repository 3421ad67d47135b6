package grayroute

import (
	"slices"
	"time"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// splitPlan is how a rule splits, for a replay: its threshold at a time
// and the names of its two versions.
type splitPlan struct {
	threshold        func(at int64) uint32
	target, fallback string
}

// planOf is g's plan; dflt names the version a rule without a fallback
// serves (the handler's default_version).
func planOf(g *Rule, dflt string) splitPlan {
	p := splitPlan{target: g.Target, fallback: g.Fallback}
	if p.fallback == "" {
		p.fallback = dflt
	}
	p.threshold = func(at int64) uint32 {
		return g.Threshold(func() time.Time { return time.Unix(0, at) })
	}
	return p
}

// version is the version p sends r to: forced requests stay with the
// fallback (the breaker's state is as recorded), the others go by their
// bucket against p's threshold at their arrival.
func (p splitPlan) version(r splitRecord) string {
	if r.Served != servedForced && r.Bucket < p.threshold(r.At) {
		return p.target
	}
	return p.fallback
}

// versionCount gathers one version's counts and keys in a replay.
type versionCount struct {
	share                    replay.VersionShare
	keysNow, keysProp, moved map[uint64]struct{}
}

// replaySplit splits recs by the rule in force and the proposed one and
// answers each version's requests and sticky keys under both.
func replaySplit(recs []splitRecord, now, prop splitPlan) []replay.VersionShare {
	counts := map[string]*versionCount{}
	get := func(v string) *versionCount {
		c := counts[v]
		if c == nil {
			c = &versionCount{share: replay.VersionShare{Version: v}, keysNow: map[uint64]struct{}{},
				keysProp: map[uint64]struct{}{}, moved: map[uint64]struct{}{}}
			counts[v] = c
		}
		return c
	}
	get(now.target)
	get(now.fallback)
	get(prop.target)
	get(prop.fallback)
	for _, r := range recs {
		vn, vp := get(now.version(r)), get(prop.version(r))
		vn.share.RequestsNow++
		vp.share.RequestsProposed++
		if vn != vp {
			vp.share.RequestsMoved++
		}
		if r.Key == 0 {
			continue
		}
		vn.keysNow[r.Key] = struct{}{}
		vp.keysProp[r.Key] = struct{}{}
		if vn != vp {
			vp.moved[r.Key] = struct{}{}
		}
	}
	out := make([]replay.VersionShare, 0, len(counts))
	for _, c := range counts {
		c.share.KeysNow, c.share.KeysProposed = int64(len(c.keysNow)), int64(len(c.keysProp))
		c.share.KeysMoved = int64(len(c.moved))
		out = append(out, c.share)
	}
	replay.SetShares(out)
	return out
}

// splitApproximations are the reasons a replay of recs from cur to prop
// is not exact.
func splitApproximations(recs []splitRecord, short bool, cur, prop *Rule) []string {
	var why []string
	if short {
		why = append(why, "short: the rule's record (32768 requests) spans less than the window")
	}
	for _, r := range recs {
		if r.Served == servedForced {
			why = append(why, "fallback_on_open: requests the open breaker sent to the fallback stay there")
			break
		}
	}
	for _, r := range recs {
		if r.Drawn {
			why = append(why, "weight 0/100: requests split at weight 0 or 100 resolved no hash key; they are replayed on a random draw and count no sticky keys")
			break
		}
	}
	if prop.HashKey.String() != cur.HashKey.String() {
		why = append(why, "hash_key: requests split by the recorded buckets, of the hash key in force")
	}
	if prop.Tag != cur.Tag || prop.Source != cur.Source || !sameMatch(prop.Value, cur.Value) {
		why = append(why, "tag: only the requests the rule in force matched are replayed")
	}
	return why
}

// sameMatch reports whether two match_values match alike.
func sameMatch(a, b ValueMatcher) bool {
	return a.kind == b.kind && slices.Equal(a.values, b.values) && (a.re == nil) == (b.re == nil) &&
		(a.re == nil || a.re.String() == b.re.String())
}
