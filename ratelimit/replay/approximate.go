package replay

import (
	"fmt"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// approximations says why a replay of tr by the two lists is not exact,
// one sentence per reason.
func approximations(tr *Trace, now, proposed []*engine.Spec, opt Options) []string {
	var out []string
	var levels []uint8
	sampled, short := false, 0
	for i := range tr.Shards {
		levels = append(levels, tr.Shards[i].Level)
		sampled = sampled || tr.Shards[i].Level > 0
		if tr.Shards[i].Short {
			short++
		}
	}
	if sampled {
		out = append(out, fmt.Sprintf("sampled: traffic outgrew the record, so whole keys were kept (1 in 2^level per shard, levels %v) and counts scaled back", levels))
	}
	if short > 0 {
		out = append(out, fmt.Sprintf("short: in %d of %d shards traffic rose faster than sampling followed, so the record spans less than the window", short, Shards))
	}
	if opt.Cluster {
		out = append(out, "cluster scope: this instance's traffic is replayed against the whole quota, which the fleet shares")
	}
	var inflight, pace, settles, adaptive bool
	for _, s := range append(append([]*engine.Spec(nil), now...), proposed...) {
		inflight = inflight || s.MaxConcurrent > 0 || s.MaxConcurrentTotal > 0
		pace = pace || s.Flow.Behavior.Paces()
		settles = settles || s.Settles
		adaptive = adaptive || s.Flow.Adaptive != nil
	}
	if inflight {
		out = append(out, "in-flight caps: decided on the concurrency recorded under the rule in force, which a different rule would change")
	}
	if pace {
		out = append(out, "pacing: waits are replayed per key, the bound max_queued on the rule's queue is not")
	}
	if settles {
		out = append(out, "settled costs: charged when admitted, at the cost known then")
	}
	if adaptive {
		out = append(out, "adaptive limit: its refusals are kept as recorded, by both rules")
	}
	return out
}
