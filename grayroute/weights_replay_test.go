package grayroute

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/ratelimit/replay"
)

// fixedPlan splits at a fixed threshold between v2 and v1.
func fixedPlan(t uint32) splitPlan {
	return splitPlan{threshold: func(int64) uint32 { return t }, target: "v2", fallback: "v1"}
}

// Raising a weight moves the keys whose buckets lie between the two
// thresholds to the target, and none back; forced requests stay with the
// fallback; requests without a key count in requests only.
func TestReplaySplitRaisedWeight(t *testing.T) {
	var recs []splitRecord
	for k := range uint64(100) {
		for i := range 3 { // 3 requests per key, buckets 0, 100, …, 9900
			recs = append(recs, splitRecord{At: int64(k*3) + int64(i), Key: k + 1, Bucket: uint32(k * 100)})
		}
	}
	recs = append(recs, splitRecord{At: 400, Bucket: 50}, // no key, inside both weights
		splitRecord{At: 401, Key: 999, Bucket: 10, Served: servedForced})
	vs := replaySplit(recs, fixedPlan(1000), fixedPlan(3000)) // 10 % → 30 %
	want := []replay.VersionShare{
		{Version: "v1", RequestsNow: 271, RequestsProposed: 211, KeysNow: 91, KeysProposed: 71},
		{Version: "v2", RequestsNow: 31, RequestsProposed: 91, RequestsMoved: 60, KeysNow: 10, KeysProposed: 30, KeysMoved: 20},
	}
	if len(vs) != 2 {
		t.Fatalf("versions %+v", vs)
	}
	for i, w := range want {
		w.ShareNow, w.ShareProposed = float64(w.RequestsNow)/302, float64(w.RequestsProposed)/302
		if vs[i] != w {
			t.Errorf("version %d: %+v, want %+v", i, vs[i], w)
		}
	}
	lower := replaySplit(recs, fixedPlan(3000), fixedPlan(1000))
	if lower[0].RequestsMoved != 60 || lower[0].KeysMoved != 20 || lower[1].RequestsMoved != 0 {
		t.Errorf("lowered: %+v", lower)
	}
}

// Merging two instances' splits adds counts by version and sets the
// shares from the sums.
func TestMergeVersions(t *testing.T) {
	a := []replay.VersionShare{{Version: "v1", RequestsNow: 90, RequestsProposed: 50}, {Version: "v2", RequestsNow: 10, RequestsProposed: 50, RequestsMoved: 40}}
	b := []replay.VersionShare{{Version: "v2", RequestsNow: 100, RequestsProposed: 100}}
	m := replay.MergeVersions(a, b)
	if len(m) != 2 || m[1].RequestsNow != 110 || m[1].RequestsMoved != 40 || m[0].ShareNow != 90.0/200 || m[1].ShareProposed != 150.0/200 {
		t.Errorf("merged %+v", m)
	}
}

// The record keeps the last splitRing requests in arrival order and says
// when it overwrote records of the window asked for.
func TestSplitRecorderSince(t *testing.T) {
	s := newSplitRecorder()
	for i := range int64(splitRing + 10) {
		s.add(splitRecord{At: i})
	}
	all, short := s.since(0)
	if len(all) != splitRing || !short || all[0].At != 10 || all[len(all)-1].At != splitRing+9 {
		t.Errorf("whole ring: %d records from %d, short %v", len(all), all[0].At, short)
	}
	tail, short := s.since(splitRing)
	if len(tail) != 10 || short {
		t.Errorf("last 10: %d records, short %v", len(tail), short)
	}
}

// A record round-trips through the ring's two words, and a split at
// weight 100 resolves no key: it draws a bucket for the record, which
// the replay marks as an approximation.
func TestSplitRecordAtFullWeight(t *testing.T) {
	s := newSplitRecorder()
	in := splitRecord{At: 7, Key: 0xdeadbeefcafef00d | 1, Bucket: 9999, Served: servedForced, Drawn: true}
	s.add(in)
	got, _ := s.since(0)
	if want := (splitRecord{At: 7, Key: in.Key>>keyShift | 1, Bucket: 9999, Served: servedForced, Drawn: true}); len(got) != 1 || got[0] != want {
		t.Fatalf("round trip: %+v, want %+v", got, want)
	}
	g, err := ParseRule("full", map[string]string{"target_version": "v2", "weight": "100", "hash_key": "{http.request.header.X-User}"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-User", "u1")
	sp := g.split(r, g.Threshold(time.Now), true)
	if !sp.canary || sp.random || !sp.drawn || sp.key != 0 || sp.bucket >= Buckets {
		t.Errorf("split at 100: %+v", sp)
	}
	why := splitApproximations([]splitRecord{{Drawn: true}}, false, g, g)
	if len(why) != 1 || !strings.HasPrefix(why[0], "weight 0/100:") {
		t.Errorf("approximations %q", why)
	}
}
