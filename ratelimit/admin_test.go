package ratelimit

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// topKeys ranks keys by the share of their quota in use, masks them, and
// reads without changing any key's state.
func TestAdminTopKeys(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields rulestore.Fields
	}{
		{"token_bucket", rulestore.Fields{"limit_type": "token_bucket", "qps": "1", "burst": "4", "key_resolver": "ip"}},
		{"sliding_window", rulestore.Fields{"limit_type": "sliding_window", "qps": "1", "window_size": "4s", "key_resolver": "ip"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseRule("top", c.fields)
			if err != nil {
				t.Fatal(err)
			}
			e := newLocalEngine(r)
			now := int64(10e9)
			take := func(key string, n int) {
				for range n {
					e.Take(r, []byte(key), now)
				}
			}
			take("ip:10.0.0.1", 1)
			take("ip:10.0.0.2", 5) // over the limit of 4
			take("ip:10.0.0.3", 2)
			st := &limiterState{rule: r, engine: e}
			top := topKeys(st, now, 2)
			if len(top) != 2 {
				t.Fatalf("top %v", top)
			}
			if top[0].Key != MaskKey("ip:10.0.0.2") || !top[0].Limited || top[0].Remaining != 0 || top[0].UsedShare != 1 || top[0].Used != 4 {
				t.Errorf("first: %+v", top[0])
			}
			if top[1].Key != MaskKey("ip:10.0.0.3") || top[1].Limited || top[1].Remaining != 2 || top[1].UsedShare != 0.5 || top[1].Used != 2 {
				t.Errorf("second: %+v", top[1])
			}
			// Reading twice gives the same answer: nothing was consumed.
			if again := topKeys(st, now, 2); again[1] != top[1] {
				t.Errorf("second read %+v, first %+v", again[1], top[1])
			}
		})
	}
}

func TestAdminMaskKey(t *testing.T) {
	for key, prefix := range map[string]string{
		"user:alice":          "user:sha256:",
		"ip:192.0.2.1":        "ip:sha256:",
		"tenant:acme:/orders": "tenant:sha256:",
		"global":              "sha256:",
	} {
		m := MaskKey(key)
		_, value, _ := strings.Cut(key, ":")
		if !strings.HasPrefix(m, prefix) || len(m) != len(prefix)+12 || value != "" && strings.Contains(m, value) {
			t.Errorf("MaskKey(%q) = %q", key, m)
		}
	}
	if MaskKey("user:alice") == MaskKey("user:bob") || MaskKey("user:alice") != MaskKey("user:alice") {
		t.Errorf("MaskKey not a stable digest")
	}
}
