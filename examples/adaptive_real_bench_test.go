package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkAdaptiveRealProcess checks the adaptive in-flight limit's goals
// (issue 28) on real processes, where the simulation
// (ratelimit/adaptive_goals_test.go) checks a model: a Caddy process built
// from this checkout, the example upstream (a fixed number of workers, a
// FIFO queue beyond them) as another, and 60 closed-loop clients in this
// one. Each case runs with a fixed work time and with the simulation's
// noise (log-normal, coefficient of variation 0.3: the upstream's
// -work-cv). A refused client waits one service time before it asks
// again, as in the simulation, so a refusal costs what an answer would
// have.
//
//   - halving cases: the capacity halves 15 s into the run; the upstream's
//     mean in flight is read in 2 s spans, and the spans from 10 s to 20 s
//     after the step are reported in C (min-C, max-C), with outside-band 1
//     when any of them left [0.7 C, 1.3 C];
//   - healthy cases: an upstream with no capacity limit and a fresh Caddy
//     for 8 s: the share of requests refused, over all of it (the
//     start-up included: the first round trip admits initial_limit) and
//     after its first second.
//
// Each run logs the controller's state (/sluice/state) each second of a
// healthy run and after each span of a halving, so a run that misses
// shows why.
//
// With SLUICE_STRESS_NG=1 each run has `stress-ng --cpu 2` beside it (the
// goal's busy machine). One run of every case takes about 5 minutes:
//
//	go test -run '^$' -bench AdaptiveRealProcess -benchtime 1x -count 5 ./examples/
//	SLUICE_STRESS_NG=1 go test -run '^$' -bench AdaptiveRealProcess -benchtime 1x -count 5 ./examples/
func BenchmarkAdaptiveRealProcess(b *testing.B) {
	// Work times fixed, and log-normal with the simulation's coefficient
	// of variation.
	workCVs := []float64{0, 0.3}
	halvings := []struct {
		service           time.Duration
		before, after     int
		minLimit, initial int
	}{
		{20 * time.Millisecond, 20, 10, 0, 0},  // the finding 1, the defaults
		{200 * time.Millisecond, 20, 10, 4, 8}, // the example's settings
		{200 * time.Millisecond, 10, 5, 4, 8},  // the example's capacities
	}
	for _, h := range halvings {
		for _, cv := range workCVs {
			b.Run(fmt.Sprintf("halving/%v/C%d-%d/cv%v", h.service, h.before, h.after, cv), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					stressBeside(b)
					r := startAdaptiveRig(b, h.service, cv, h.before, h.minLimit, h.initial)
					spans := r.halving(b, h.after)
					lo, hi := math.Inf(1), 0.0
					for _, s := range spans[5:] { // 10 s to 20 s after the step
						lo, hi = min(lo, s), max(hi, s)
					}
					out := 0.0
					if lo < 0.7 || hi > 1.3 {
						out = 1
					}
					b.Logf("in flight per 2 s span after the step, in C: %.2f (C %d before: %.2f C); the controller after each: %s",
						spans, h.before, r.before, strings.Join(r.states, "; "))
					b.ReportMetric(lo, "min-C")
					b.ReportMetric(hi, "max-C")
					b.ReportMetric(out, "outside-band")
					b.ReportMetric(r.before, "C-before")
				}
			})
		}
	}
	for _, service := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		for _, cv := range workCVs {
			b.Run(fmt.Sprintf("healthy/%v/cv%v", service, cv), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					stressBeside(b)
					minLimit, initial := 0, 0
					if service >= 100*time.Millisecond {
						minLimit, initial = 4, 8
					}
					r := startAdaptiveRig(b, service, cv, 100000, minLimit, initial)
					whole, late, states := r.load(b, 8*time.Second, time.Second)
					b.Logf("%d admitted, %d refused (%.1f %%); after the first second %d and %d (%.1f %%); each second: %s",
						whole.admitted, whole.refused, whole.share(), late.admitted, late.refused, late.share(), strings.Join(states, "; "))
					b.ReportMetric(whole.share(), "%-refused")
					b.ReportMetric(late.share(), "%-refused-after-1s")
				}
			})
		}
	}
}

// adaptiveRig is one Caddy process with the adaptive limit in front of one
// upstream process, and the load that drives it.
type adaptiveRig struct {
	gateway, upstream string
	admin             string // Caddy's admin endpoint
	service           time.Duration
	clients           int
	admitted, refused atomic.Int64
	before            float64  // in flight in C over the 4 s before a halving
	states            []string // the controller at the end of each span after a halving
}

// startAdaptiveRig starts the upstream (capacity workers of service each)
// and a Caddy whose one site limits it with max_concurrent adaptive: the
// defaults but for min_limit and initial_limit (0: the default), and a
// sample window of 2.5 service times, at least the default 250 ms.
func startAdaptiveRig(b *testing.B, service time.Duration, cv float64, capacity, minLimit, initial int) *adaptiveRig {
	b.Helper()
	upPort, sitePort := testcaddy.FreePort(b), testcaddy.FreePort(b)
	r := &adaptiveRig{service: service, clients: 60,
		upstream: startUpstream(b, upPort, "-capacity", fmt.Sprint(capacity), "-work", service.String(), "-work-cv", fmt.Sprint(cv)),
		gateway:  fmt.Sprintf("http://127.0.0.1:%d", sitePort)}
	var fields strings.Builder
	if minLimit > 0 {
		fmt.Fprintf(&fields, "\t\t\tmin_limit %d\n\t\t\tinitial_limit %d\n", minLimit, initial)
	}
	fmt.Fprintf(&fields, "\t\t\tsample_window %v\n", max(250*time.Millisecond, service*5/2))
	p := testcaddy.Start(b, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		rate_limit adaptive {
			key_resolver global
			max_concurrent adaptive
%s			concurrency_status 503
		}
	}
}
http://127.0.0.1:%d {
	ratelimit adaptive
	reverse_proxy 127.0.0.1:%d
}
`, fields.String(), sitePort, upPort))
	r.admin = fmt.Sprintf("http://localhost:%d", p.AdminPort)
	return r
}

// adaptiveState is the rule's controller as /sluice/state shows it.
type adaptiveState struct {
	Limit     int64   `json:"limit"`
	MinRTT    float64 `json:"min_rtt"`
	SampleRTT float64 `json:"latency"`
	Measuring bool    `json:"probing"`
}

func (s adaptiveState) String() string {
	m := ""
	if s.Measuring {
		m = " (measuring)"
	}
	return fmt.Sprintf("limit %d, minRTT %.1f ms, sampled %.1f ms%s", s.Limit, 1e3*s.MinRTT, 1e3*s.SampleRTT, m)
}

// state reads the controller's state from the admin API.
func (r *adaptiveRig) state(b *testing.B) adaptiveState {
	b.Helper()
	st, err := adaptiveStateOf(r.admin, "adaptive")
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// adaptiveStateOf reads rule's adaptive controller from the admin API at
// admin. It does not fail the test itself: a watcher calls it from its
// own goroutine.
func adaptiveStateOf(admin, rule string) (adaptiveState, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(admin + "/sluice/state")
	if err != nil {
		return adaptiveState{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return adaptiveState{}, err
	}
	var st struct {
		Ratelimit struct {
			Rules []struct {
				Rule string `json:"rule"`
				Flow struct {
					Adaptive adaptiveState `json:"adaptive"`
				} `json:"flow"`
			} `json:"rules"`
		} `json:"ratelimit"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return adaptiveState{}, fmt.Errorf("state: %v\n%s", err, body)
	}
	for _, r := range st.Ratelimit.Rules {
		if r.Rule == rule {
			return r.Flow.Adaptive, nil
		}
	}
	return adaptiveState{}, fmt.Errorf("state: no rule %s\n%s", rule, body)
}

// answers counts the load's requests admitted (answered 200) and refused
// (503).
type answers struct{ admitted, refused int64 }

// share is the percentage refused.
func (a answers) share() float64 {
	return 100 * float64(a.refused) / float64(max(a.admitted+a.refused, 1))
}

// load runs the closed-loop clients for d (whole seconds) and returns the
// answers over all of it and over what followed its first skip, and the
// controller's state at the end of each second. Any other answer or a
// transport error fails the benchmark.
func (r *adaptiveRig) load(b *testing.B, d, skip time.Duration) (whole, late answers, states []string) {
	b.Helper()
	stop := r.start()
	begin := time.Now()
	var early answers
	for s := time.Second; s <= d; s += time.Second {
		time.Sleep(time.Until(begin.Add(s))) // sleep: the load's schedule, one second at a time
		if s == skip {
			early = answers{r.admitted.Load(), r.refused.Load()}
		}
		states = append(states, r.state(b).String())
	}
	if e := stop(); e != "" {
		b.Fatalf("load: %s", e)
	}
	whole = answers{r.admitted.Load(), r.refused.Load()}
	return whole, answers{whole.admitted - early.admitted, whole.refused - early.refused}, states
}

// start runs the clients until the returned stop is called; stop returns
// the first unexpected answer or error, if any.
func (r *adaptiveRig) start() (stop func() string) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * r.clients}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range r.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", r.gateway+"/work", nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err.Error())
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					r.admitted.Add(1)
				case 503:
					r.refused.Add(1)
					select { // a refusal costs the client an answer's time
					case <-ctx.Done():
					case <-time.After(r.service):
					}
				default:
					firstErr.CompareAndSwap(nil, fmt.Sprintf("answer %d", resp.StatusCode))
				}
			}
		}()
	}
	return func() string {
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
		e, _ := firstErr.Load().(string)
		return e
	}
}

// halving runs the load for 15 s at the upstream's capacity, halves it to
// after and returns the upstream's mean in flight, in C, in each 2 s span
// of the 20 s after the step. r.before is in flight over the last 4 s
// before the step, in the capacity then.
func (r *adaptiveRig) halving(b *testing.B, after int) []float64 {
	b.Helper()
	stop := r.start()
	span := func(d time.Duration) float64 { // the mean in flight over the next d
		post(b, r.upstream+"/stats/reset")
		time.Sleep(d) // sleep: the span measured
		return stats(b, r.upstream)["mean_in_flight"]
	}
	time.Sleep(11 * time.Second) // sleep: the run's schedule (C-before reports where the limit was)
	capacity := stats(b, r.upstream)["capacity"]
	r.before = span(4*time.Second) / capacity
	post(b, r.upstream+fmt.Sprintf("/capacity?value=%d", after))
	var spans []float64
	for range 10 {
		spans = append(spans, span(2*time.Second)/float64(after))
		r.states = append(r.states, r.state(b).String())
	}
	if e := stop(); e != "" {
		b.Fatalf("load: %s", e)
	}
	return spans
}

// stressBeside starts `stress-ng --cpu 2` for the rest of the benchmark
// when SLUICE_STRESS_NG=1.
func stressBeside(b *testing.B) {
	b.Helper()
	if os.Getenv("SLUICE_STRESS_NG") != "1" {
		return
	}
	cmd := exec.Command("stress-ng", "--cpu", "2", "--quiet")
	if err := cmd.Start(); err != nil {
		b.Fatalf("SLUICE_STRESS_NG=1 needs stress-ng (apt-get install -y stress-ng): %v", err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}
