package replay

import (
	"cmp"
	"slices"
)

// VersionShare is one version's share of a gray rule's recorded traffic
// under the weights in force and the proposed ones (the `versions` of an
// impact; absent for other kinds).
type VersionShare struct {
	Version string `json:"version"`
	// RequestsNow and RequestsProposed are the requests this version
	// serves under the rule in force and the proposed one; the shares are
	// their fractions of all requests the versions list holds.
	RequestsNow      int64   `json:"requests_now"`
	RequestsProposed int64   `json:"requests_proposed"`
	ShareNow         float64 `json:"share_now"`
	ShareProposed    float64 `json:"share_proposed"`
	// RequestsMoved are the requests the proposed rule sends to this
	// version that the rule in force sent to another.
	RequestsMoved int64 `json:"requests_moved"`
	// KeysNow, KeysProposed and KeysMoved count sticky keys (hash key
	// values) the same way; requests without a key count in none.
	KeysNow      int64 `json:"keys_now"`
	KeysProposed int64 `json:"keys_proposed"`
	KeysMoved    int64 `json:"keys_moved"`
}

// MergeVersions sums two versions lists by name and sets the shares
// from the sums, sorted by version.
func MergeVersions(a, b []VersionShare) []VersionShare {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := slices.Clone(a)
	for _, v := range b {
		i := slices.IndexFunc(out, func(o VersionShare) bool { return o.Version == v.Version })
		if i < 0 {
			out = append(out, v)
			continue
		}
		o := &out[i]
		o.RequestsNow += v.RequestsNow
		o.RequestsProposed += v.RequestsProposed
		o.RequestsMoved += v.RequestsMoved
		o.KeysNow += v.KeysNow
		o.KeysProposed += v.KeysProposed
		o.KeysMoved += v.KeysMoved
	}
	SetShares(out)
	return out
}

// SetShares sets each version's shares from its request counts and sorts
// the list by version.
func SetShares(vs []VersionShare) {
	var now, prop int64
	for _, v := range vs {
		now += v.RequestsNow
		prop += v.RequestsProposed
	}
	for i := range vs {
		vs[i].ShareNow, vs[i].ShareProposed = fraction(vs[i].RequestsNow, now), fraction(vs[i].RequestsProposed, prop)
	}
	slices.SortFunc(vs, func(x, y VersionShare) int { return cmp.Compare(x.Version, y.Version) })
}

func fraction(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
