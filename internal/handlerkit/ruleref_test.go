package handlerkit

import (
	"encoding/json"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// A rule list entry reads as an id string (ratelimit's documented
// "rules": ["a"]) or an object (grayroute's {"id": "a", "inline": {...}}),
// and is written as it was read.
func TestRuleRefJSONShapes(t *testing.T) {
	var refs []RuleRef[*rulestore.GraySpec]
	in := `["a", {"id": "b"}, {"id": "c", "inline": {"target_version": "v2", "weight": 10}}]`
	if err := json.Unmarshal([]byte(in), &refs); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 3 || refs[0].ID != "a" || refs[0].HasInline() || refs[1].ID != "b" || refs[1].HasInline() ||
		refs[2].ID != "c" || refs[2].Inline.TargetVersion != "v2" {
		t.Fatalf("read %+v", refs)
	}
	out, err := json.Marshal(refs)
	if err != nil {
		t.Fatal(err)
	}
	if want := `["a",{"id":"b"},{"id":"c","inline":{"target_version":"v2","weight":10}}]`; string(out) != want {
		t.Fatalf("wrote %s, want %s", out, want)
	}
	for _, bad := range []string{`[1]`, `[{"id": "x", "inline": {"colour": "red"}}]`} {
		if err := json.Unmarshal([]byte(bad), &refs); err == nil {
			t.Errorf("%s: read without an error", bad)
		}
	}
}
