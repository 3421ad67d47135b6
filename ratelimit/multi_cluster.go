package ratelimit

import "github.com/sluicegw/sluice/ratelimit/cluster"

// Several cluster limits in one script (cluster.DecideAll): a list whose
// rules all count exactly in Redis is decided by one call, which spends on
// every rule or on none.

// atomicFits reports whether rule r can be decided with the others in
// one script: exact cluster counting, refusals that count, no parent (a
// nested quota spends along its tree in a script of its own).
func atomicFits(r *Rule) bool {
	return r.Cluster() && r.LeaseSize == 0 && !r.Shadow && r.Flow.Behavior == Reject && r.Flow.Adaptive == nil &&
		r.Nest.Parent == ""
}

// decideAtomic decides ts (keys in kb and costs set, engines cluster
// engines) by one script (cluster.DecideAll). It returns the index of the
// rule that refused, or -1 when all admitted (each ts[i].admitted, holding
// its in-flight slot); handled is false, with nothing taken, when the list
// cannot be decided so: the caller then decides rule by rule. The script
// gets copies of the rules' parts, so ts stays on the stack.
func decideAtomic(ts []taken, kb []byte) (refused int, handled bool) {
	var buf [4]cluster.Part
	ps := buf[:0]
	if len(ts) > len(buf) {
		ps = make([]cluster.Part, 0, len(ts))
	}
	for i := range ts {
		t := &ts[i]
		ps = append(ps, cluster.Part{Rule: &t.m.rule.Rule, Host: t.m.lim, Engine: t.eng.(*clusterEngine).Engine,
			KFrom: t.kfrom, KTo: t.kto, Cost: t.cost, Spent: t.spent()})
	}
	refused, handled = cluster.DecideAll(ps, kb)
	for i := range ts {
		ts[i].d, ts[i].decided, ts[i].admitted = ps[i].D, ps[i].Decided, ps[i].Admitted
	}
	return refused, handled
}
