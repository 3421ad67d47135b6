package nested

// Spend decides a spend of n at path[0], the leaf, and at every level up
// to the root, path[len(path)-1], at now (Unix ns: calendar windows are
// the wall clock's; buckets need only a clock that does not step back).
// The leaf spends from its own ceiling; each level above lends its
// child's spend by the child's guarantee and what it has unused (lend).
// Either every level commits or none does: a refusal at any level leaves
// every state as it was. out receives each level's part and use.
//
// The caller serialises access to the path's states. A path has 1 to
// MaxDepth nodes; a spend of n ≤ 0 changes nothing (it reads, as Usage).
// Spend does not allocate.
func Spend(path []Node, n float64, now int64, out *Outcome) bool {
	if n <= 0 {
		Usage(path, now, out)
		return true
	}
	var next [MaxDepth]State
	if !decide(path, n, now, out, &next) {
		refused, wait := out.Refused, out.Wait
		Usage(path, now, out)
		out.Refused, out.Wait = refused, wait
		return false
	}
	for i := range path {
		*path[i].State = next[i]
	}
	return true
}

// Usage reads each level's use at now without changing any state (as a
// spend of 0 would find it).
func Usage(path []Node, now int64, out *Outcome) {
	var next [MaxDepth]State
	decide(path, 0, now, out, &next)
}

// decide works out the spend on copies of the path's states, into next.
func decide(path []Node, n float64, now int64, out *Outcome, next *[MaxDepth]State) bool {
	if len(path) == 0 || len(path) > MaxDepth {
		panic("nested: a path has 1 to MaxDepth nodes")
	}
	*out = Outcome{Depth: len(path), Refused: -1}
	for i := range path {
		next[i] = *path[i].State
		next[i].refresh(path[i].Limit, now)
	}
	var share [MaxDepth]Limit
	var backed [MaxDepth]bool
	shares(path, &share, &backed)
	leaf := path[0].Limit
	if !next[0].take(leaf, n) {
		out.Refused, out.Wait = 0, next[0].wait(leaf, n, now)
		return false
	}
	var links [MaxDepth]link
	for i := len(path) - 1; i >= 1; i-- {
		links[i] = link{c: &next[i-1], p: &next[i], g: path[i-1].Guarantee, pl: path[i].Limit,
			share: &share[i], backed: backed[i-1], pbacked: backed[i], height: i - 1}
		links[i].grant(now)
	}
	for i := 1; i < len(path); i++ {
		links[i].chained = i > 1 && out.Levels[i-2].Borrowed <= 0
		ok, wait := links[i].lend(n, now, &out.Levels[i-1])
		if !ok {
			out.Refused, out.Wait = i, wait
			return false
		}
	}
	for i := range path {
		out.Levels[i].show(&next[i], path[i].Limit)
	}
	return true
}
