package rawfields

// Suggest returns the known name nearest to name, for a "did you mean"
// hint, or "" when none is close enough to be a likely typo: at most one
// edit for short names, about one edit per three letters for longer ones.
func Suggest(name string, known ...string) string {
	best, bestDist := "", maxTypoDistance(name)+1
	for _, k := range known {
		if k == name {
			return k
		}
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// DidYouMean is ": did you mean <name>?" for the nearest known name, or "".
func DidYouMean(name string, known ...string) string {
	if s := Suggest(name, known...); s != "" && s != name {
		return ": did you mean " + s + "?"
	}
	return ""
}

func maxTypoDistance(name string) int {
	return max(1, len(name)/3)
}

// editDistance is the Damerau–Levenshtein (optimal string alignment)
// distance, so a swapped pair of letters counts as one typo.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // not a typo of a field name
	}
	var rows [3][65]int
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
