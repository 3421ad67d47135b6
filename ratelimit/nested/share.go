package nested

// shares works out, top down, what each node's children's guarantees are
// shares of (into share) and whether that is the node's own guarantee
// (backed). A node guaranteed at a parent of its kind hands down its
// guarantee: g of what it is guaranteed, capped at its ceiling, so its
// children's guarantees hold end to end. Otherwise (the root, a node
// without a guarantee, a calendar whose windows are not its parent's, a
// bucket under a calendar or the reverse) it hands down its ceiling.
func shares(path []Node, share *[MaxDepth]Limit, backed *[MaxDepth]bool) {
	top := len(path) - 1
	share[top], backed[top] = *path[top].Limit, false
	for i := top - 1; i >= 0; i-- {
		l, p, g := path[i].Limit, &share[i+1], path[i].Guarantee
		share[i], backed[i] = *l, false
		if g <= 0 {
			continue
		}
		switch {
		case l.Calendar == nil && p.Calendar == nil:
			share[i].QPS, share[i].Burst = min(l.QPS, g*p.QPS), min(l.Burst, g*p.Burst)
			backed[i] = true
		case l.Calendar != nil && p.Calendar != nil && sameWindows(l, p):
			share[i].Quota = min(l.Quota, g*p.Quota)
			backed[i] = true
		}
	}
}

// sameWindows reports whether two calendar quotas count in the same
// windows: one period in one zone.
func sameWindows(a, b *Limit) bool {
	return a.Calendar.Period == b.Calendar.Period && a.Calendar.Zone.String() == b.Calendar.Zone.String()
}

// Shares is shares for a caller that decides elsewhere (the cluster
// script, which takes each level's share as an argument).
func Shares(path []Node, share *[MaxDepth]Limit, backed *[MaxDepth]bool) {
	shares(path, share, backed)
}
