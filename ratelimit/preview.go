package ratelimit

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// previewer answers the store's previews of rate_limit rules
// (rulestore.Previewer) from this process's record of each rule's
// traffic (record.go): it replays the record against the rule in force
// and the proposed one (ratelimit/replay).
type previewer struct{}

// Impact replays the last window of rule id's record (rulestore.Previewer).
func (previewer) Impact(id string, proposed any, window time.Duration) (replay.Impact, error) {
	prop, ok := proposed.(*Rule)
	if !ok {
		return replay.Impact{}, fmt.Errorf("rate_limit rule %q: not a rate limit rule (%T)", id, proposed)
	}
	lim, ok := limiters.Load(id)
	if !ok {
		return rulestore.EmptyImpact(window), nil
	}
	s, rec := lim.state.Load(), lim.rec.Load()
	if s != nil && !s.rule.Record {
		imp := rulestore.EmptyImpact(window)
		imp.Approximate = []string{"not recorded: the rule sets record false"}
		return imp, nil
	}
	if s == nil || rec == nil {
		return rulestore.EmptyImpact(window), nil
	}
	now := lim.now()
	tr := rec.Snapshot(now)
	tr.Since(now - int64(window))
	imp := replay.Replay(tr, []*engine.Spec{&s.rule.Spec}, []*engine.Spec{&prop.Spec}, replay.Options{Cluster: s.rule.Cluster()})
	if imp.TopKeys == nil {
		imp.TopKeys = []replay.KeyImpact{}
	}
	for i := range imp.TopKeys {
		if k := &imp.TopKeys[i]; !strings.HasPrefix(k.Key, "#") {
			k.Key = s.rule.shownKey(k.Key) // masked unless raw_keys, as everywhere
		}
	}
	return imp, nil
}
