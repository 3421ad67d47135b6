package examples_test

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// The example with a service time: v1 and v2 work on each request of
// /work for a log-normal time (mean 10 ms, coefficient of variation 0.5),
// v2 for longer or as long; the rule's min_latency_delta is 5 ms. The
// analysis judges the upstream's own time (to its response header), so
// the gateway's stalls on a busy machine do not hide the difference.

// serviceRuns is how many canaries a service-time test runs one after
// another: 1, or SLUICE_CANARY_RUNS.
func serviceRuns(t *testing.T) int {
	s := os.Getenv("SLUICE_CANARY_RUNS")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("SLUICE_CANARY_RUNS=%q: want a number of runs", s)
	}
	return n
}

// startServiceExample starts the example with v2 working v2Work on each
// /work request, and points the traffic at /work.
func startServiceExample(t *testing.T, v2Work string) *canaryExample {
	t.Helper()
	t.Setenv("V1_ARGS", "-work 10ms -work-cv 0.5 -capacity 100")
	t.Setenv("V2_ARGS", "-work "+v2Work+" -work-cv 0.5 -capacity 100")
	t.Setenv("MIN_LATENCY_DELTA", "5ms")
	e := startCanaryExample(t, "0")
	for i := range e.gateways {
		e.gateways[i] += "work"
	}
	return e
}

// runCanary puts the rule, waits for the canary's end (rolled back or
// promoted) and returns the verdicts written.
func runCanary(t *testing.T, e *canaryExample, run int) (state string, w []report, took time.Duration) {
	t.Helper()
	start := time.Now()
	e.putRule(t)
	testcaddy.Eventually(t, 300*time.Second, fmt.Sprintf("run %d: a verdict", run), func() bool {
		state, _ = e.state(t, e.admins[0])
		return state == "promoted" || state == "rolled_back"
	})
	return state, e.written(t, start), time.Since(start).Round(100 * time.Millisecond)
}

// loadAverage is the machine's 1-minute load average, for the record
// ("?" where /proc/loadavg is not there).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// tally records each run's result and time, and logs them all at the end.
type tally struct {
	t          *testing.T
	what       string
	ok, runs   int
	took, load []string
}

func (y *tally) add(ok bool, took time.Duration) {
	y.runs++
	if ok {
		y.ok++
	}
	y.took = append(y.took, took.String())
	y.load = append(y.load, loadAverage())
}

func (y *tally) log() {
	y.t.Logf("%s: %d of %d; times to the verdict %v; load averages %v", y.what, y.ok, y.runs, y.took, y.load)
}

// TestCanaryAnalysisSlowerService: v2 twice as slow in service time (10 →
// 20 ms mean) is rolled back for latency, never advanced. 50 % slower:
// SLUICE_V2_WORK=15ms (the figures of docs/grayroute.md, with
// SLUICE_CANARY_RUNS=20). Every run is judged; the test logs how many of
// them were rolled back, and fails if any was not.
func TestCanaryAnalysisSlowerService(t *testing.T) {
	work := cmp.Or(os.Getenv("SLUICE_V2_WORK"), "20ms")
	e := startServiceExample(t, work)
	stop := e.traffic(6)
	defer stop()
	y := &tally{t: t, what: "v2 " + work + " rolled back for latency, never advanced"}
	defer y.log()
	for run := 1; run <= serviceRuns(t); run++ {
		state, w, took := runCanary(t, e, run)
		ok := state == "rolled_back" && len(w) == 1 && w[0].Action == "rollback" && strings.Contains(w[0].Reason, "canary slower")
		y.add(ok, took)
		if !ok {
			t.Errorf("run %d: %s after %v; verdicts written: %+v; want one rollback, for latency", run, state, took, w)
			continue
		}
		t.Logf("run %d (v2 %s): rolled back after %v at %d canary requests: %s", run, work, took, w[0].CanaryRequests, w[0].Reason)
	}
}

// TestCanaryAnalysisSameService: v2 as fast as v1 (10 ms mean) is
// promoted, never rolled back; every run is judged and counted.
func TestCanaryAnalysisSameService(t *testing.T) {
	e := startServiceExample(t, "10ms")
	stop := e.traffic(6)
	defer stop()
	y := &tally{t: t, what: "v2 as fast promoted, never rolled back"}
	defer y.log()
	for run := 1; run <= serviceRuns(t); run++ {
		state, w, took := runCanary(t, e, run)
		ok := state == "promoted" && len(w) > 0 && w[len(w)-1].Action == "promote"
		for _, v := range w {
			ok = ok && (v.Action == "advance" || v.Action == "promote")
		}
		y.add(ok, took)
		if !ok {
			t.Errorf("run %d: %s after %v; verdicts written: %+v", run, state, took, w)
			continue
		}
		t.Logf("run %d: promoted after %v at %d canary requests", run, took, w[len(w)-1].CanaryRequests)
	}
}
