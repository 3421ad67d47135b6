package replay

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Impact is what a proposed rule would have done to the recorded
// traffic, against the rule in force: the `impact` object of a dry run
// and of `caddy sluice preview`. Counts are requests (sampled records
// scaled back); Merge sums the answers of several instances.
type Impact struct {
	Window    string    `json:"window"`
	Instances Instances `json:"instances"`
	Requests  int64     `json:"requests"`
	// RefusedRecorded: what the rule in force refused as recorded;
	// RefusedNow: what its replay refuses (the two differ by the
	// replay's approximations).
	RefusedRecorded  int64 `json:"refused_recorded"`
	RefusedNow       int64 `json:"refused_now"`
	RefusedProposed  int64 `json:"refused_proposed"`
	NewlyRefused     int64 `json:"newly_refused"`
	NewlyAllowed     int64 `json:"newly_allowed"`
	KeysNewlyRefused int64 `json:"keys_newly_refused"`
	KeysNewlyAllowed int64 `json:"keys_newly_allowed"`
	// TopKeys are the keys most affected, by newly refused then newly
	// allowed requests.
	TopKeys []KeyImpact `json:"top_keys"`
	// Records is how many records were replayed (before scaling).
	Records int64 `json:"records"`
	// Approximate says what the replay could not reproduce exactly; empty
	// when it is exact.
	Approximate []string `json:"approximate,omitempty"`
	// Versions is a gray rule's split between its versions (versions.go);
	// Breaker a circuit breaker's trips (breaker.go). Absent for other kinds.
	Versions []VersionShare `json:"versions,omitempty"`
	Breaker  *BreakerTrips  `json:"breaker,omitempty"`
}

// Instances counts the instances asked for an impact and those that
// answered.
type Instances struct {
	Asked    int `json:"asked"`
	Answered int `json:"answered"`
}

// KeyImpact is one key's change.
type KeyImpact struct {
	Key          string `json:"key"`
	NewlyRefused int64  `json:"newly_refused"`
	NewlyAllowed int64  `json:"newly_allowed"`
}

// TopKeys is how many keys an Impact lists.
const TopKeys = 10

// Merge adds b's answer to a: counts add, keys affected add (a key seen
// on two instances counts twice: instances keep no common key set), the
// top keys are merged by name, and the reasons for approximation are
// joined. Asked is the larger of the two (the asker sets it).
func (a *Impact) Merge(b *Impact) {
	if a.Window == "" {
		a.Window = b.Window
	}
	a.Instances.Asked = max(a.Instances.Asked, b.Instances.Asked)
	a.Instances.Answered += b.Instances.Answered
	a.Requests += b.Requests
	a.RefusedRecorded += b.RefusedRecorded
	a.RefusedNow += b.RefusedNow
	a.RefusedProposed += b.RefusedProposed
	a.NewlyRefused += b.NewlyRefused
	a.NewlyAllowed += b.NewlyAllowed
	a.KeysNewlyRefused += b.KeysNewlyRefused
	a.KeysNewlyAllowed += b.KeysNewlyAllowed
	a.Records += b.Records
	a.TopKeys = topOf(append(slices.Clone(a.TopKeys), b.TopKeys...))
	a.Versions = MergeVersions(a.Versions, b.Versions)
	a.Breaker = mergeBreaker(a.Breaker, b.Breaker)
	for _, r := range b.Approximate {
		if !slices.Contains(a.Approximate, r) {
			a.Approximate = append(a.Approximate, r)
		}
	}
}

// topOf sums keys of the same name and keeps the TopKeys most affected
// (on a tie, named keys first).
func topOf(keys []KeyImpact) []KeyImpact {
	sum := make(map[string]int, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if i, ok := sum[k.Key]; ok {
			out[i].NewlyRefused += k.NewlyRefused
			out[i].NewlyAllowed += k.NewlyAllowed
			continue
		}
		sum[k.Key] = len(out)
		out = append(out, k)
	}
	slices.SortFunc(out, func(x, y KeyImpact) int {
		if c := cmp.Compare(y.NewlyRefused, x.NewlyRefused); c != 0 {
			return c
		}
		if c := cmp.Compare(y.NewlyAllowed, x.NewlyAllowed); c != 0 {
			return c
		}
		// On a tie a named key comes before one shown by its hash.
		if xh, yh := strings.HasPrefix(x.Key, "#"), strings.HasPrefix(y.Key, "#"); xh != yh {
			if xh {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.Key, y.Key)
	})
	return out[:min(len(out), TopKeys)]
}

func windowString(ns int64) string {
	return time.Duration(ns).Round(time.Second).String()
}
