package ratelimit_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// busyEnv makes TestBusyChild, in a child process, spin that many
// goroutines until it is killed: CPU contention for the test that starts
// it, on a host that has nothing to do with Redis.
const busyEnv = "SLUICE_BUSY_CHILD"

func TestBusyChild(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(busyEnv))
	if n <= 0 {
		return // only as a child of TestClusterDenyHealthyUnderCPUContention
	}
	runtime.GOMAXPROCS(n)
	for range n - 1 {
		go func() {
			for {
			}
		}()
	}
	for {
	}
}

// busyChild starts a process spinning n goroutines for the test's life.
func busyChild(t *testing.T, n int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBusyChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", busyEnv, n))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// loadAverage is the host's one-minute load average.
func loadAverage(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A cluster rule with on_redis_error deny and the default redis_timeout
// refuses nothing while Redis is healthy, however busy the host: the
// timeout counts the time a decision waits on Redis from its batch's
// write, not the time it queued behind a starved scheduler. Other
// processes spin on every core while clients keep many requests in flight;
// no request may get 503. SLUICE_SOAK=1 runs it for 60 s under heavier
// contention and requires a load average of at least 10 by its end.
func TestClusterDenyHealthyUnderCPUContention(t *testing.T) {
	if testing.Short() {
		t.Skip("CPU contention for seconds")
	}
	run, spinners, clients := 8*time.Second, 4, 16
	soak := os.Getenv("SLUICE_SOAK") != ""
	if soak {
		run, spinners, clients = 60*time.Second, 12, 24
	}
	rd := redistest.Start(t)
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}", `
	ratelimit {
		qps 1000000
		burst 1000000
		key_resolver userId
		scope cluster
		on_redis_error deny
	}
	respond "ok"`)
	testcaddy.Run(t, s.cfg)
	expect(t, s.urls[0], []int{200}, "X-User-Id: warm") // scripts loaded, gate up
	busyChild(t, spinners)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	end := time.Now().Add(run)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				req, _ := http.NewRequest(http.MethodGet, s.urls[0], nil)
				req.Header.Set("X-User-Id", fmt.Sprintf("u%d-%d", c, i%64))
				code := -1
				if resp, err := client.Do(req); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				counts[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if counts[http.StatusServiceUnavailable] != 0 || counts[http.StatusOK] != total || total == 0 {
		t.Errorf("statuses %v of %d requests with Redis healthy, want all 200 (a 503 is on_redis_error deny on a healthy Redis)", counts, total)
	}
	if !soak {
		return
	}
	// The soak's figures, for the goal: 0 refusals over 60 s at load ≥ 10.
	load := loadAverage(t)
	t.Logf("RESULT %d requests in %v with %d spinning goroutines in another process: statuses %v, load average %.1f",
		total, run, spinners, counts, load)
	if load < 10 {
		t.Errorf("load average %.1f at the end of the soak, want at least 10 for the goal it measures", load)
	}
}
