package circuitbreaker_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkServer compares whole-server throughput of plain Caddy with the
// same route behind a closed breaker, and times the fast-fail of an open
// (forced open) breaker. Compare plain and closed ns/op for the ratio.
func BenchmarkServer(b *testing.B) {
	port := testcaddy.FreePort(b)
	testcaddy.Run(b, fmt.Sprintf(`{
	%s
}
http://127.0.0.1:%d {
	handle /plain {
		respond "ok"
	}
	handle /closed {
		circuitbreaker {
			window 100
			failure_rate 50
		}
		respond "ok"
	}
	handle /open {
		circuitbreaker {
			state force_open
		}
		respond "ok"
	}
}
`, testcaddy.Options(b), port))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, path := range []string{"plain", "closed", "open"} {
		url := fmt.Sprintf("http://127.0.0.1:%d/%s", port, path)
		want := 200
		if path == "open" {
			want = 503
		}
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						b.Errorf("%s: %d", path, resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
