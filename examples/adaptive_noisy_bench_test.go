package examples_test

import (
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// BenchmarkAdaptiveNoisyKeyReal is the noisy-key case of the simulation
// (ratelimit/overload, TestSimNoisyKeyGetsItsShare) on real processes: a
// Caddy built from this checkout with `max_concurrent adaptive` keyed on
// X-Key, the example upstream (10 workers of 20 ms, work time log-normal
// with a coefficient of variation of 0.3: 500 requests a second) and
// open-loop Poisson load from this process. Ten quiet keys ask 400
// requests a second together, 0.8 of the capacity; the noisy key asks as
// much again. Each round runs the quiet keys alone and beside the noisy
// key, 15 s each after 3 s of warm-up, order rotated, and reports the
// quiet keys' p99 (end to end, at the client) beside the noisy key over
// alone: median and range over -benchtime rounds (at least 3), the noisy
// key's goodput and the share of the quiet keys' requests refused. Each
// round logs the controller's state at its end.
//
//	go test -run '^$' -bench AdaptiveNoisyKeyReal -benchtime 3x ./examples/
func BenchmarkAdaptiveNoisyKeyReal(b *testing.B) {
	upPort, sitePort := testcaddy.FreePort(b), testcaddy.FreePort(b)
	startUpstream(b, upPort, "-capacity", "10", "-work", "20ms", "-work-cv", "0.3")
	p := testcaddy.Start(b, fmt.Sprintf(`{
	admin localhost:{{admin}}
	persist_config off
	rulestore {
		rate_limit adaptive {
			key_resolver {http.request.header.X-Key}
			max_concurrent adaptive
			concurrency_status 503
		}
	}
}
http://127.0.0.1:%d {
	ratelimit adaptive
	reverse_proxy 127.0.0.1:%d
}
`, sitePort, upPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/work", sitePort)
	admin := fmt.Sprintf("http://localhost:%d", p.AdminPort)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	noisyRound(client, url, 3*time.Second, false) // warm-up: the first probe and windows
	rounds := max(b.N, 3)
	var ratios, refused, noisyRate []float64
	b.ResetTimer()
	for i := range rounds {
		var alone, beside noisyFigures
		if i%2 == 0 {
			alone, beside = noisyRound(client, url, 15*time.Second, false), noisyRound(client, url, 15*time.Second, true)
		} else {
			beside, alone = noisyRound(client, url, 15*time.Second, true), noisyRound(client, url, 15*time.Second, false)
		}
		if alone.failed+beside.failed > 0 {
			b.Fatalf("%d requests failed or got another status than 200 or 503", alone.failed+beside.failed)
		}
		st, err := adaptiveStateOf(admin, "adaptive")
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("round %d: quiet p99 %v alone, %v beside the noisy key; quiet refused %.4f and %.4f; noisy key %.0f/s; then %v",
			i, alone.p99, beside.p99, alone.refused, beside.refused, beside.noisyRate, st)
		ratios = append(ratios, float64(beside.p99)/float64(alone.p99))
		refused = append(refused, beside.refused)
		noisyRate = append(noisyRate, beside.noisyRate)
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "p99-ratio-median")
	b.ReportMetric(ratios[0], "p99-ratio-min")
	b.ReportMetric(ratios[len(ratios)-1], "p99-ratio-max")
	b.ReportMetric(100*slices.Max(refused), "%-quiet-refused-max")
	b.ReportMetric(slices.Max(noisyRate), "noisy-req/s-max")
}

// noisyFigures are one run's: the quiet keys' p99 and share refused, the
// noisy key's answers a second, and the requests that failed.
type noisyFigures struct {
	p99       time.Duration
	refused   float64
	noisyRate float64
	failed    int64
}

// noisyRound sends the quiet keys' load for d, and the noisy key's beside
// it when noisy, and waits for every answer.
func noisyRound(client *http.Client, url string, d time.Duration, noisy bool) noisyFigures {
	var (
		mu                         sync.Mutex
		lat                        []time.Duration
		asked, refused, noisyOK, f atomic.Int64
	)
	send := func(key string, quiet bool) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Key", key)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			f.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		switch {
		case resp.StatusCode == 200 && quiet:
			mu.Lock()
			lat = append(lat, took)
			mu.Unlock()
		case resp.StatusCode == 200:
			noisyOK.Add(1)
		case resp.StatusCode == 503 && quiet:
			refused.Add(1)
		case resp.StatusCode != 503:
			f.Add(1)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		poissonLoad(d, 400, 1, func(r *rand.Rand) {
			asked.Add(1)
			send(fmt.Sprintf("quiet-%d", r.Intn(10)), true)
		})
	}()
	if noisy {
		wg.Add(1)
		go func() { defer wg.Done(); poissonLoad(d, 400, 2, func(*rand.Rand) { send("noisy", false) }) }()
	}
	wg.Wait()
	slices.Sort(lat)
	fig := noisyFigures{refused: float64(refused.Load()) / float64(max(asked.Load(), 1)),
		noisyRate: float64(noisyOK.Load()) / d.Seconds(), failed: f.Load()}
	if len(lat) > 0 {
		fig.p99 = lat[len(lat)*99/100]
	}
	return fig
}

// poissonLoad calls f at Poisson arrivals of rate per second for d, each
// call in its own goroutine (open loop), and waits for all. f gets the
// sender's random source, seeded with seed (only the sender uses it).
func poissonLoad(d time.Duration, rate float64, seed int64, f func(*rand.Rand)) {
	r := rand.New(rand.NewSource(seed))
	var wg sync.WaitGroup
	start := time.Now()
	next := time.Duration(0)
	for next < d {
		time.Sleep(time.Until(start.Add(next))) // sleep: the arrivals' schedule
		wg.Add(1)
		k := r.Int63()
		go func() { defer wg.Done(); f(rand.New(rand.NewSource(k))) }()
		next += time.Duration(r.ExpFloat64() / rate * float64(time.Second))
	}
	wg.Wait()
}
