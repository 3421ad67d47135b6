// Command upgradecheck drives traffic through two Caddy instances, one of
// the previous release and one of this build, sharing one Redis and one
// cluster-scope rule per engine, in the three phases of a rolling upgrade:
// only the old instance serves, both serve (each key's requests alternate
// between them), only the new one serves. It prints, per engine, phase and
// build, what was allowed and refused, the longest time a key went without
// an allowed request at one instance while it kept asking (a key denied),
// and responses that were neither allowed nor refused by quota (e.g. 503
// from on_redis_error deny). scripts/upgrade-check.sh builds and starts
// everything; docs/ratelimit-cluster.md has the figures.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

// sample is one request's outcome.
type sample struct {
	at     time.Duration // since the start
	phase  int           // 0 old only, 1 both, 2 new only
	build  int           // 0 old, 1 new
	status int           // 0: no answer
}

var phaseNames = [3]string{"old only", "both", "new only"}
var buildNames = [2]string{"old", "new"}

func main() {
	oldURL := flag.String("old", "", "base URL of the previous release's instance")
	newURL := flag.String("new", "", "base URL of this build's instance")
	keys := flag.Int("keys", 4, "keys (X-Api-Key values) per engine")
	rate := flag.Float64("rate", 20, "requests per second per key and engine")
	phase := flag.Duration("phase", 10*time.Second, "length of each phase")
	window := flag.Duration("window", 2*time.Second, "the rules' window (burst/qps, window_size), to compare with")
	qps := flag.Float64("qps", 5, "the rules' qps, to compare with")
	flag.Parse()
	if *oldURL == "" || *newURL == "" {
		fmt.Fprintln(os.Stderr, "usage: upgradecheck -old URL -new URL [-keys n -rate r -phase d -window d -qps q]")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	engines := []string{"tb", "sw"}
	results := make(map[string][][]sample) // engine → key → samples
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, eng := range engines {
		results[eng] = make([][]sample, *keys)
		for k := range *keys {
			wg.Go(func() {
				tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
				defer tick.Stop()
				var got []sample
				for n := 0; ; n++ {
					at := time.Since(start)
					p := int(at / *phase)
					if p > 2 {
						break
					}
					b := p / 2 // phase 0: old, phase 2: new
					if p == 1 {
						b = n % 2
					}
					base := *oldURL
					if b == 1 {
						base = *newURL
					}
					req, _ := http.NewRequest("GET", base+"/"+eng, nil)
					req.Header.Set("X-Api-Key", fmt.Sprintf("%s-key-%d", eng, k))
					s := sample{at: at, phase: p, build: b}
					if resp, err := client.Do(req); err == nil {
						s.status = resp.StatusCode
						resp.Body.Close()
					}
					got = append(got, s)
					<-tick.C
				}
				mu.Lock()
				results[eng][k] = got
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	fmt.Printf("rules: qps %g, window %v; %d keys per engine at %g requests/s each; phases of %v\n\n", *qps, *window, *keys, *rate, *phase)
	fmt.Printf("%-6s %-9s %-5s %8s %8s %8s %8s %12s %14s\n", "engine", "phase", "build", "requests", "allowed", "429", "other", "allowed/s/key", "longest denied")
	bad := map[int]int{} // status (0: no answer) → responses neither allowed nor refused by quota
	for _, eng := range engines {
		for p := range 3 {
			for b := range 2 {
				var req, ok, limited, other int
				var longest time.Duration
				for _, ss := range results[eng] {
					var deniedSince time.Duration = -1
					for _, s := range ss {
						if s.phase != p || s.build != b {
							continue
						}
						req++
						switch s.status {
						case 200:
							ok++
						case 429:
							limited++
						default:
							other++
							bad[s.status]++
						}
						if s.status == 200 {
							if deniedSince >= 0 {
								longest = max(longest, s.at-deniedSince)
							}
							deniedSince = -1
						} else if deniedSince < 0 {
							deniedSince = s.at
						}
					}
					if deniedSince >= 0 { // denied to the end of the phase
						longest = max(longest, time.Duration(p+1)**phase-deniedSince)
					}
				}
				if req == 0 {
					continue
				}
				fmt.Printf("%-6s %-9s %-5s %8d %8d %8d %8d %12.2f %14v\n", eng, phaseNames[p], buildNames[b], req, ok, limited, other,
					float64(ok)/phase.Seconds()/float64(*keys), longest.Round(10*time.Millisecond))
			}
		}
	}
	// Allowed per key over each phase, both builds together.
	fmt.Printf("\nallowed per key and phase, both builds (one format's bound: qps × phase + one window's quota = %.0f)\n", *qps*phase.Seconds()+*qps*window.Seconds())
	for _, eng := range engines {
		for p := range 3 {
			var per []int
			for _, ss := range results[eng] {
				n := 0
				for _, s := range ss {
					if s.phase == p && s.status == 200 {
						n++
					}
				}
				per = append(per, n)
			}
			sort.Ints(per)
			fmt.Printf("%-6s %-9s min %d max %d\n", eng, phaseNames[p], per[0], per[len(per)-1])
		}
	}
	if len(bad) > 0 {
		fmt.Printf("\nresponses neither allowed nor refused by quota, by status (0: no answer in 2s): %v\n", bad)
		os.Exit(1)
	}
}
