package replay

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The impact object carries the contract's names.
func TestImpactJSON(t *testing.T) {
	b, err := json.Marshal(Impact{TopKeys: []KeyImpact{{Key: "user:1", NewlyRefused: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"window", "instances", "requests", "refused_now", "refused_proposed",
		"newly_refused", "newly_allowed", "keys_newly_refused", "top_keys"} {
		if _, ok := m[name]; !ok {
			t.Errorf("no %q in %s", name, b)
		}
	}
	inst := m["instances"].(map[string]any)
	top := m["top_keys"].([]any)[0].(map[string]any)
	if _, ok := inst["answered"]; !ok || top["key"] != "user:1" || top["newly_refused"] != 3.0 {
		t.Errorf("instances or top keys: %s", b)
	}
}

// Merge sums two instances' answers and merges their top keys by name.
func TestImpactMerge(t *testing.T) {
	a := Impact{Window: "10m0s", Instances: Instances{Asked: 3, Answered: 1}, Requests: 100, RefusedNow: 10,
		RefusedProposed: 20, NewlyRefused: 12, NewlyAllowed: 2, KeysNewlyRefused: 2,
		TopKeys:     []KeyImpact{{Key: "a", NewlyRefused: 8}, {Key: "b", NewlyRefused: 4}},
		Approximate: []string{"pacing"}}
	b := Impact{Window: "10m0s", Instances: Instances{Asked: 3, Answered: 1}, Requests: 50, RefusedNow: 5,
		RefusedProposed: 6, NewlyRefused: 1, KeysNewlyRefused: 1,
		TopKeys:     []KeyImpact{{Key: "b", NewlyRefused: 6}},
		Approximate: []string{"pacing", "sampled"}}
	a.Merge(&b)
	want := Impact{Window: "10m0s", Instances: Instances{Asked: 3, Answered: 2}, Requests: 150, RefusedNow: 15,
		RefusedProposed: 26, NewlyRefused: 13, NewlyAllowed: 2, KeysNewlyRefused: 3,
		TopKeys:     []KeyImpact{{Key: "b", NewlyRefused: 10}, {Key: "a", NewlyRefused: 8}},
		Approximate: []string{"pacing", "sampled"}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("merged\n%+v\nwant\n%+v", a, want)
	}
	var sum Impact
	sum.Merge(&b)
	if sum.Instances.Answered != 1 || sum.Requests != 50 || len(b.TopKeys) != 1 {
		t.Fatalf("merge into an empty impact: %+v (b %+v)", sum, b)
	}
}
