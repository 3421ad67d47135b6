package grayroute_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkServer compares whole requests through Caddy with and without
// grayroute (5 rules, the last one matching, hashed at weight 20).
func BenchmarkServer(b *testing.B) {
	plainPort, grayPort := testcaddy.FreePort(b), testcaddy.FreePort(b)
	testcaddy.Run(b, fmt.Sprintf(`{
	%s
	rulestore {
		gray r1 {
			match_tag      X-Tag-1
			target_version v2
		}
		gray r2 {
			match_tag      X-Tag-2
			target_version v2
		}
		gray r3 {
			match_tag      X-Tag-3
			target_version v2
		}
		gray r4 {
			match_tag      X-Tag-4
			target_version v2
		}
		gray beta {
			match_tag      X-Beta
			match_value    yes
			target_version v2
			weight         20
		}
	}
}
http://127.0.0.1:%d {
	respond "ok"
}
http://127.0.0.1:%d {
	grayroute r1 r2 r3 r4 beta
	respond "ok"
}`, testcaddy.Options(b), plainPort, grayPort))

	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	run := func(b *testing.B, port int) {
		url := fmt.Sprintf("http://127.0.0.1:%d/", port)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("X-Beta", "yes")
				req.Header.Set("X-User-Id", "user-12345")
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	b.Run("plain", func(b *testing.B) { run(b, plainPort) })
	b.Run("grayroute", func(b *testing.B) { run(b, grayPort) })
}
