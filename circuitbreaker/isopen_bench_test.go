package circuitbreaker_test

import (
	"fmt"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkIsOpen is grayroute's fallback_on_open check as it runs in
// production: a real Caddy holds the rule in its store, so each call looks
// the rule up there (where a Redis change would show) before reading the
// per-key state.
func BenchmarkIsOpen(b *testing.B) {
	port := testcaddy.FreePort(b)
	testcaddy.Run(b, fmt.Sprintf(`{
	%s
	rulestore {
		circuit_breaker bench_isopen {
			failure_threshold 5
			key               {http.request.header.X-Version}
		}
	}
}
http://127.0.0.1:%d {
	circuitbreaker bench_isopen
	respond "ok"
}
`, testcaddy.Options(b), port))
	resp, _ := testcaddy.Get(b, fmt.Sprintf("http://127.0.0.1:%d/", port), "X-Version: v2")
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	states := rulestore.Active().Breakers() // grayroute holds its config's
	b.ReportAllocs()
	for b.Loop() {
		if states.IsOpen("bench_isopen", "v2") {
			b.Fatal("open")
		}
	}
}
