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
