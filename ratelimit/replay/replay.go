package replay

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// Options are what a replay needs to know beyond the rules.
type Options struct {
	// Cluster: the rules count in Redis across the fleet (scope cluster);
	// this instance's traffic is replayed against the whole quota.
	Cluster bool
}

// Replay decides tr's requests by the rules in force (now) and by the
// proposed ones, each a list a request passes when every rule admits it
// (one rule is a list of one), on fresh local engines fed the recorded
// arrivals in time order, and compares the two. The rules of a list are
// replayed on the recorded key and cost: several limits on one key.
//
// Shards share no key, so each is replayed on its own engines, in
// parallel.
func Replay(tr *Trace, now, proposed []*engine.Spec, opt Options) Impact {
	var tallies [Shards]tally
	var wg sync.WaitGroup
	for i := range tr.Shards {
		wg.Go(func() {
			ts := &tr.Shards[i]
			cur := newRules(now, now, ts.Level)
			prop := newRules(proposed, now, ts.Level)
			tallies[i] = replayShard(ts, cur, prop)
		})
	}
	wg.Wait()
	imp := Impact{Window: windowString(tr.To - tr.From), Instances: Instances{Asked: 1, Answered: 1}}
	var keys []KeyImpact
	for i := range tallies {
		keys = tallies[i].addTo(&imp, &tr.Shards[i], keys)
	}
	imp.TopKeys = topOf(keys)
	imp.Approximate = approximations(tr, now, proposed, opt)
	return imp
}

// tally is one shard's counts, in records (unscaled).
type tally struct {
	records, refusedRecorded, refusedNow, refusedProposed int64
	newlyRefused, newlyAllowed                            int64
	keys                                                  map[uint64]*[2]int64 // newly refused, allowed
}

func replayShard(ts *TraceShard, cur, prop rules) tally {
	t := tally{keys: make(map[uint64]*[2]int64)}
	for i := range ts.Records {
		rec := &ts.Records[i]
		t.records++
		if rec.Outcome.Refused() {
			t.refusedRecorded++
		}
		okNow, okProp := cur.admit(rec), prop.admit(rec)
		if !okNow {
			t.refusedNow++
		}
		if !okProp {
			t.refusedProposed++
		}
		if okNow == okProp {
			continue
		}
		k := t.keys[rec.Key]
		if k == nil {
			k = new([2]int64)
			t.keys[rec.Key] = k
		}
		if okNow {
			t.newlyRefused++
			k[0]++
		} else {
			t.newlyAllowed++
			k[1]++
		}
	}
	return t
}

// addTo adds t, scaled by its shard's sampling, to imp, and its keys to
// keys.
func (t *tally) addTo(imp *Impact, ts *TraceShard, keys []KeyImpact) []KeyImpact {
	w := int64(1) << ts.Level
	imp.Records += t.records
	imp.Requests += t.records * w
	imp.RefusedRecorded += t.refusedRecorded * w
	imp.RefusedNow += t.refusedNow * w
	imp.RefusedProposed += t.refusedProposed * w
	imp.NewlyRefused += t.newlyRefused * w
	imp.NewlyAllowed += t.newlyAllowed * w
	for h, k := range t.keys {
		if k[0] > 0 {
			imp.KeysNewlyRefused += w
		}
		if k[1] > 0 {
			imp.KeysNewlyAllowed += w
		}
		name, ok := ts.Names[h]
		if !ok {
			name = fmt.Sprintf("#%016x", h)
		}
		keys = append(keys, KeyImpact{Key: name, NewlyRefused: k[0] * w, NewlyAllowed: k[1] * w})
	}
	return keys
}

// rules is a list of rules replayed together: a request passes when every
// rule admits it. Its rules spend as they admit; when one refuses, those
// before it are refunded, as the handler does with several limits.
type rules []lane

// lane is one rule of a replay: the rule as given, the copy its engine
// decides by (in-flight caps and settlement are replayed here, not by the
// engine), and the engine.
type lane struct {
	spec  *engine.Spec
	run   *engine.Spec
	eng   *engine.Local
	scale float64 // its cost over the rule in force's, at the same place
}

// newRules makes fresh engines for specs; base is the list in force,
// whose costs the recorded ones were.
func newRules(specs, base []*engine.Spec, level uint8) rules {
	rs := make(rules, len(specs))
	for i, s := range specs {
		run := replaySpec(s, level)
		rs[i] = lane{spec: s, run: run, eng: engine.NewLocal(run), scale: 1}
		if i < len(base) && base[i].Cost > 0 && s.Cost > 0 {
			rs[i].scale = float64(s.Cost) / float64(base[i].Cost)
		}
	}
	return rs
}

// replaySpec is s as a replay's engine decides by it: keys are the
// records' 8-byte hashes (overrides too), costs are charged when
// admitted, no in-flight caps, no adaptive limit, an unbounded pacing
// queue, and max_keys in proportion to the keys a sampled shard holds.
func replaySpec(s *engine.Spec, level uint8) *engine.Spec {
	run := *s
	run.MaxConcurrent, run.MaxConcurrentTotal = 0, 0
	run.Settles, run.Reserve = false, 0
	run.Flow.Adaptive = nil
	run.Flow.MaxQueued = math.MaxInt64
	run.MaxKeys = 1 << 30
	if s.MaxKeys > 0 {
		run.MaxKeys = max(1, s.MaxKeys/Shards>>level)
	}
	if len(s.Overrides) > 0 {
		run.Overrides = make(map[string]*engine.Limits, len(s.Overrides))
		for k, l := range s.Overrides {
			var kb [8]byte
			binary.BigEndian.PutUint64(kb[:], keyHash([]byte(k)))
			run.Overrides[string(kb[:])] = l
		}
	}
	return &run
}

// admit decides rec by every rule of rs.
func (rs rules) admit(rec *Record) bool {
	if rec.Outcome == OtherRefused {
		return false
	}
	var kb [8]byte
	binary.BigEndian.PutUint64(kb[:], rec.Key)
	for i := range rs {
		if !rs[i].admit(kb[:], rec) {
			for j := range rs[:i] {
				rs[j].refund(kb[:], rec)
			}
			return false
		}
	}
	return true
}

func (l *lane) cost(rec *Record) int64 {
	if l.scale == 1 {
		return int64(rec.Cost)
	}
	return max(1, int64(math.Round(float64(rec.Cost)*l.scale)))
}

// admit decides rec by l: the in-flight caps on the concurrency recorded,
// then the rate on l's engine.
func (l *lane) admit(key []byte, rec *Record) bool {
	s := l.spec
	if s.MaxConcurrentTotal > 0 && int64(rec.Total) >= s.MaxConcurrentTotal {
		return false
	}
	if s.MaxConcurrent > 0 && int32(rec.KeyIn) >= s.MaxConcurrent {
		return false
	}
	if s.InFlightOnly {
		return true
	}
	d := l.eng.TakeCost(l.run, key, rec.At, l.cost(rec))
	return d.OK()
}

// refund gives back what l's admit took: a later rule refused.
func (l *lane) refund(key []byte, rec *Record) {
	if !l.spec.InFlightOnly {
		l.eng.Settle(l.run, key, rec.At, -l.cost(rec))
	}
}
