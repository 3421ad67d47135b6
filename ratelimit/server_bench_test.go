package ratelimit_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkServer sends whole requests through an in-process Caddy, as
// scripts/bench.sh does with wrk: every request from one of 10,000 users
// picked at random, to `respond "ok"` alone, behind a rate limit by user
// id (a rule of the store that never rejects) with headers on and off, and
// behind the full chain. Compare ns/op with plain for the handlers' share;
// profile with -cpuprofile and focus on net/http.(*conn).serve for the
// server's side.
func BenchmarkServer(b *testing.B) {
	ports := map[string]int{}
	cases := []string{"plain", "ratelimit", "ratelimit-noheaders", "chain"}
	body := map[string]string{
		"plain":               "",
		"ratelimit":           "\tratelimit bench_rl\n",
		"ratelimit-noheaders": "\tratelimit bench_rl_nohdr\n",
		"chain":               "\tratelimit bench_rl\n\tcircuitbreaker bench_cb\n\tgrayroute bench_gray\n",
	}
	sites := ""
	for _, c := range cases {
		ports[c] = testcaddy.FreePort(b)
		sites += fmt.Sprintf("http://127.0.0.1:%d {\n%s\trespond \"ok\"\n}\n", ports[c], body[c])
	}
	testcaddy.Run(b, fmt.Sprintf(`{
	%s
	log {
		level ERROR
	}
	rulestore {
		rate_limit bench_rl {
			limit_type token_bucket
			qps 1000000000
			key_resolver userId
		}
		rate_limit bench_rl_nohdr {
			limit_type token_bucket
			qps 1000000000
			key_resolver userId
			headers false
		}
		circuit_breaker bench_cb {
			failure_threshold 1000000
		}
		gray bench_gray {
			match_tag X-Canary
			match_value true
			target_version v2
		}
	}
}
%s`, testcaddy.Options(b), sites))
	users := make([]string, 10_000)
	for i := range users {
		users[i] = fmt.Sprint("user", i+1)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, c := range cases {
		url := fmt.Sprintf("http://127.0.0.1:%d/", ports[c])
		b.Run(c, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, url, nil)
					req.Header["X-User-Id"] = []string{users[rand.IntN(len(users))]}
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("%s: status %d", c, resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
