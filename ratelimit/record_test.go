package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/ratelimit/replay"
	"github.com/sluicegw/sluice/rulestore"
)

// A rule's record is kept when the rule changes and its key stays, and
// dropped when its key changes (its records are of keys no longer made).
func TestRecordKeptWhileTheKeyStays(t *testing.T) {
	parse := func(f rulestore.Fields) *Rule {
		t.Helper()
		r, err := ParseRule("rk", f)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	lim := newLimiter("rk", nil)
	defer lim.Destruct()
	lim.engine(parse(rulestore.Fields{"qps": "5", "key_resolver": "userId"}))
	rec := lim.recorder()
	rec.Record([]byte("user:a"), replay.Arrival{At: lim.now(), Cost: 1})
	lim.engine(parse(rulestore.Fields{"qps": "1", "key_resolver": "userId"}))
	if lim.rec.Load() != rec {
		t.Fatal("a change of qps dropped the record")
	}
	lim.engine(parse(rulestore.Fields{"qps": "1", "key_resolver": "ip"}))
	if lim.rec.Load() != nil {
		t.Fatal("a change of key kept the record")
	}
}
