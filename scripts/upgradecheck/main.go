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

// options are the command's flags.
type options struct {
	oldURL, newURL string
	keys           int
	rate, qps      float64
	phase, window  time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.oldURL, "old", "", "base URL of the previous release's instance")
	flag.StringVar(&o.newURL, "new", "", "base URL of this build's instance")
	flag.IntVar(&o.keys, "keys", 4, "keys (X-Api-Key values) per engine")
	flag.Float64Var(&o.rate, "rate", 20, "requests per second per key and engine")
	flag.DurationVar(&o.phase, "phase", 10*time.Second, "length of each phase")
	flag.DurationVar(&o.window, "window", 2*time.Second, "the rules' window (burst/qps, window_size), to compare with")
	flag.Float64Var(&o.qps, "qps", 5, "the rules' qps, to compare with")
	flag.Parse()
	if o.oldURL == "" || o.newURL == "" {
		fmt.Fprintln(os.Stderr, "usage: upgradecheck -old URL -new URL [-keys n -rate r -phase d -window d -qps q]")
		os.Exit(2)
	}
	results := o.drive()
	fmt.Printf("rules: qps %g, window %v; %d keys per engine at %g requests/s each; phases of %v\n\n", o.qps, o.window, o.keys, o.rate, o.phase)
	bad := o.printPhases(results)
	o.printPerKey(results)
	if len(bad) > 0 {
		fmt.Printf("\nresponses neither allowed nor refused by quota, by status (0: no answer in 2s): %v\n", bad)
		os.Exit(1)
	}
}

// engines are the rules' engines, each behind the path of its name.
var engines = []string{"tb", "sw"}

// drive sends every key's traffic through the three phases and returns
// the samples, engine → key → samples.
func (o *options) drive() map[string][][]sample {
	client := &http.Client{Timeout: 2 * time.Second}
	results := make(map[string][][]sample)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, eng := range engines {
		results[eng] = make([][]sample, o.keys)
		for k := range o.keys {
			wg.Go(func() {
				got := o.key(client, start, eng, k)
				mu.Lock()
				results[eng][k] = got
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return results
}

// key sends one key's requests at o.rate until the last phase ends: to
// the old instance, then to both in turn, then to the new one.
func (o *options) key(client *http.Client, start time.Time, eng string, k int) []sample {
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	defer tick.Stop()
	var got []sample
	for n := 0; ; n++ {
		at := time.Since(start)
		p := int(at / o.phase)
		if p > 2 {
			return got
		}
		b := p / 2 // phase 0: old, phase 2: new
		if p == 1 {
			b = n % 2
		}
		base := o.oldURL
		if b == 1 {
			base = o.newURL
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
}

// tally is what one engine's keys got in one phase from one build.
type tally struct {
	requests, ok, limited, other int
	longest                      time.Duration // the longest a key went denied
}

// printPhases prints a tally per engine, phase and build, and returns the
// responses neither allowed nor refused by quota, by status (0: no answer).
func (o *options) printPhases(results map[string][][]sample) map[int]int {
	fmt.Printf("%-6s %-9s %-5s %8s %8s %8s %8s %12s %14s\n", "engine", "phase", "build", "requests", "allowed", "429", "other", "allowed/s/key", "longest denied")
	bad := map[int]int{}
	for _, eng := range engines {
		for p := range 3 {
			for b := range 2 {
				var t tally
				for _, ss := range results[eng] {
					o.count(&t, ss, p, b, bad)
				}
				if t.requests == 0 {
					continue
				}
				fmt.Printf("%-6s %-9s %-5s %8d %8d %8d %8d %12.2f %14v\n", eng, phaseNames[p], buildNames[b], t.requests, t.ok, t.limited, t.other,
					float64(t.ok)/o.phase.Seconds()/float64(o.keys), t.longest.Round(10*time.Millisecond))
			}
		}
	}
	return bad
}

// count adds one key's samples of phase p and build b to t, and the
// other statuses to bad.
func (o *options) count(t *tally, ss []sample, p, b int, bad map[int]int) {
	var deniedSince time.Duration = -1
	for _, s := range ss {
		if s.phase != p || s.build != b {
			continue
		}
		t.requests++
		switch s.status {
		case 200:
			t.ok++
		case 429:
			t.limited++
		default:
			t.other++
			bad[s.status]++
		}
		if s.status == 200 {
			if deniedSince >= 0 {
				t.longest = max(t.longest, s.at-deniedSince)
			}
			deniedSince = -1
		} else if deniedSince < 0 {
			deniedSince = s.at
		}
	}
	if deniedSince >= 0 { // denied to the end of the phase
		t.longest = max(t.longest, time.Duration(p+1)*o.phase-deniedSince)
	}
}

// printPerKey prints the least and the most a key was allowed over each
// phase, both builds together, beside the bound one format allows.
func (o *options) printPerKey(results map[string][][]sample) {
	fmt.Printf("\nallowed per key and phase, both builds (one format's bound: qps × phase + one window's quota = %.0f)\n", o.qps*o.phase.Seconds()+o.qps*o.window.Seconds())
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
}
