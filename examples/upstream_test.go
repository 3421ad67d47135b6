package examples_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

var (
	upstreamOnce sync.Once
	upstreamBin  string
	upstreamErr  error
	upstreamDir  string
)

// TestMain removes the upstream binary built for the whole run.
func TestMain(m *testing.M) {
	code := m.Run()
	if upstreamDir != "" {
		os.RemoveAll(upstreamDir)
	}
	os.Exit(code)
}

// startUpstream builds examples/upstream once per test run and runs it on
// 127.0.0.1:<port> with args, until the test ends. It returns its URL.
func startUpstream(t testing.TB, port int, args ...string) string {
	t.Helper()
	upstreamOnce.Do(func() {
		upstreamDir, upstreamErr = os.MkdirTemp("", "sluice-examples-")
		if upstreamErr != nil {
			return
		}
		upstreamBin = filepath.Join(upstreamDir, "upstream")
		out, err := exec.Command("go", "build", "-o", upstreamBin, "./upstream").CombinedOutput()
		if err != nil {
			upstreamErr = fmt.Errorf("go build ./upstream: %v\n%s", err, out)
		}
	})
	if upstreamErr != nil {
		t.Fatal(upstreamErr)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(upstreamBin, append([]string{"-addr", addr}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := "http://" + addr
	testcaddy.Eventually(t, 10*time.Second, "upstream "+addr+" answering", func() bool {
		resp, err := http.Get(url + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	return url
}
