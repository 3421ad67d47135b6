package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkNestedGuaranteeGoodput measures the goals of nested quotas
// through a real Caddy (orgOf100: an org of 100/s, two teams guaranteed
// 50 % each): team a asking 300/s and team b 40/s for 5 s, then a alone
// for 5 s. It reports b's goodput over what it asked (goal ≥ 0.97), a's
// alone over its ceiling of 100/s (goal ≥ 0.95) and the org's rate while
// both are busy (at most 100/s and its slack). Run it with -benchtime 1x.
func BenchmarkNestedGuaranteeGoodput(b *testing.B) {
	admin, port := testcaddy.FreePort(b), testcaddy.FreePort(b)
	testcaddy.Run(b, fmt.Sprintf("{\n\tadmin localhost:%d\n\tpersist_config off\n%s\n}\nhttp://127.0.0.1:%d {\n\tratelimit team\n\trespond \"ok\"\n}\n",
		admin, orgOf100, port))
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	const d = 5 * time.Second
	var bRatio, aRatio, orgRate float64
	for i := 0; i < b.N; i++ {
		ta, tb := &flow{team: fmt.Sprint("a", i), rate: 300}, &flow{team: fmt.Sprint("b", i), rate: 40}
		took := drive(b, url, d, ta, tb)
		bRatio += float64(tb.ok.Load()) / float64(tb.sent.Load())
		orgRate += float64(ta.ok.Load()+tb.ok.Load()) / took.Seconds()
		time.Sleep(200 * time.Millisecond) // sleep: the org's bucket refills (burst 10 at 100/s: 100 ms) before a runs alone
		alone := &flow{team: ta.team, rate: 300}
		took = drive(b, url, d, alone)
		aRatio += float64(alone.ok.Load()) / (100 * took.Seconds())
	}
	b.ReportMetric(bRatio/float64(b.N), "b-goodput/asked")
	b.ReportMetric(aRatio/float64(b.N), "a-alone/ceiling")
	b.ReportMetric(orgRate/float64(b.N), "org-req/s")
}

// BenchmarkNestedClusterGoodput is BenchmarkNestedGuaranteeGoodput with
// the tree in scope cluster on two Caddy processes sharing Redis, each
// team's demand split evenly over them. Run it with -benchtime 1x.
func BenchmarkNestedClusterGoodput(b *testing.B) {
	urls, _ := twoCaddysOnOneTree(b)
	const d = 5 * time.Second
	split := func(team string, rate float64) [2]*flow {
		return [2]*flow{{team: team, rate: rate / 2}, {team: team, rate: rate / 2}}
	}
	both := func(fs ...[2]*flow) time.Duration {
		done := make(chan time.Duration, 1)
		go func() {
			var on1 []*flow
			for _, f := range fs {
				on1 = append(on1, f[1])
			}
			done <- drive(b, urls[1], d, on1...)
		}()
		var on0 []*flow
		for _, f := range fs {
			on0 = append(on0, f[0])
		}
		return max(drive(b, urls[0], d, on0...), <-done)
	}
	okOf := func(f [2]*flow) float64 { return float64(f[0].ok.Load() + f[1].ok.Load()) }
	sentOf := func(f [2]*flow) float64 { return float64(f[0].sent.Load() + f[1].sent.Load()) }
	var bRatio, aRatio, orgRate float64
	for i := 0; i < b.N; i++ {
		ta, tb := split(fmt.Sprint("a", i), 300), split(fmt.Sprint("b", i), 40)
		took := both(ta, tb)
		bRatio += okOf(tb) / sentOf(tb)
		orgRate += (okOf(ta) + okOf(tb)) / took.Seconds()
		time.Sleep(200 * time.Millisecond) // sleep: the org's bucket refills (burst 10 at 100/s: 100 ms) before a runs alone
		alone := split(ta[0].team, 300)
		took = both(alone)
		aRatio += okOf(alone) / (100 * took.Seconds())
	}
	b.ReportMetric(bRatio/float64(b.N), "b-goodput/asked")
	b.ReportMetric(aRatio/float64(b.N), "a-alone/ceiling")
	b.ReportMetric(orgRate/float64(b.N), "org-req/s")
}
