package grayroute

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// splitIndex finds the record of a gray rule id's split
// (weights_record.go). A rule holds its record (Rule.splits); the index
// holds it weakly, so a changed rule of the same id (a new *Rule) takes
// over the record of the one it replaces, and a record goes with the last
// rule of its id that holds it (a deleted rule's record is collected).
type splitIndex struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[splitRecorder]
}

// splitRecorders is the process's index: rules outlive a config.
var splitRecorders = &splitIndex{m: map[string]weak.Pointer[splitRecorder]{}}

// of returns g's record, taking its id's or making one on g's first request.
func (x *splitIndex) of(g *Rule) *splitRecorder {
	if rec := g.splits.Load(); rec != nil {
		return rec
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if rec := g.splits.Load(); rec != nil {
		return rec
	}
	rec := x.m[g.ID].Value()
	if rec == nil {
		rec = newSplitRecorder()
		x.m[g.ID] = weak.Make(rec)
		runtime.AddCleanup(rec, x.drop, g.ID)
	}
	g.splits.Store(rec)
	return rec
}

// load returns id's record, or nil.
func (x *splitIndex) load(id string) *splitRecorder {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[id].Value()
}

// drop forgets id once its record was collected.
func (x *splitIndex) drop(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m[id].Value() == nil {
		delete(x.m, id)
	}
}

// recordSplits makes the handler answer the store's previews of gray rules.
func (h *Handler) recordSplits(store *rulestore.App) {
	store.SetPreviewer(rulestore.Gray, weightsPreviewer{store: store})
}

// recordSplit records a request rule g split as s.
func (h *Handler) recordSplit(g *Rule, s splitOf, forced bool) {
	rec := splitRecorders.of(g)
	if rec.dflt.Load() != &h.DefaultVersion {
		rec.dflt.Store(&h.DefaultVersion)
	}
	sv := servedFallback
	switch {
	case forced:
		sv = servedForced
	case s.canary:
		sv = servedTarget
	}
	rec.add(splitRecord{At: h.recordNow(), Key: s.key, Bucket: s.bucket, Served: sv, Drawn: s.drawn})
}

// recordNow is a record's arrival: the store's coarse clock, or
// the handler's clock when a test injected one.
func (h *Handler) recordNow() int64 {
	if h.coarse {
		return h.store.RecordClock().Now()
	}
	return h.now().UnixNano()
}

// weightsPreviewer answers the store's previews of gray rules
// (rulestore.Previewer): it replays a rule's recorded split under the
// rule in force and the proposed one (weights_replay.go).
type weightsPreviewer struct{ store *rulestore.App }

// Impact replays the last window of rule id's split (rulestore.Previewer).
func (p weightsPreviewer) Impact(id string, proposed any, window time.Duration) (replay.Impact, error) {
	prop, ok := proposed.(*Rule)
	if !ok {
		return replay.Impact{}, fmt.Errorf("gray rule %q: not a gray rule (%T)", id, proposed)
	}
	imp := rulestore.EmptyImpact(window)
	rec := splitRecorders.load(id)
	cur := p.store.Lookup(rulestore.Gray, id)
	if rec == nil || cur == nil {
		return imp, nil
	}
	curRule, ok := cur.Value.(*Rule)
	if !ok {
		return imp, nil
	}
	recs, short := rec.since(time.Now().UnixNano() - int64(window))
	dflt := DefaultVersion
	if d := rec.dflt.Load(); d != nil {
		dflt = *d
	}
	imp.Requests, imp.Records = int64(len(recs)), int64(len(recs))
	imp.Versions = replaySplit(recs, planOf(curRule, dflt), planOf(prop, dflt))
	imp.Approximate = splitApproximations(recs, short, curRule, prop)
	return imp, nil
}
