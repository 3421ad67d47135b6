package ratelimit

import (
	"context"
	"github.com/sluicegw/sluice/ratelimit/engine"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The adaptive limit's latency sample is the upstream's: from the request
// written to the upstream to its first byte back. Time spent in the gateway
// before (here 50 ms of another handler's work) and after (reading a slow
// body) is left out; without an HTTP client the whole span counts.
func TestUpstreamTimerSpansTheUpstreamOnly(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // sleep: the upstream's service time
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond) // sleep: a slow body, after the first byte
		io.WriteString(w, "done")
	}))
	defer up.Close()
	timer := &upstreamTimer{now: engine.Now}
	admitted := engine.Now()
	time.Sleep(50 * time.Millisecond) // sleep: time inside the gateway before the upstream
	req, _ := http.NewRequestWithContext(timer.trace(context.Background()), "GET", up.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	returned := engine.Now()
	start, end := timer.span(admitted, returned)
	if d := time.Duration(end - start); d < 20*time.Millisecond || start < admitted+int64(50*time.Millisecond) || end > returned-int64(40*time.Millisecond) {
		t.Fatalf("span %v from %v after admission to %v before the return; want >= 20ms, starting after the 50ms in the gateway and ending before the 50ms body",
			d, time.Duration(start-admitted), time.Duration(returned-end))
	}
	bare := &upstreamTimer{now: engine.Now}
	if s, e := bare.span(admitted, returned); s != admitted || e != returned {
		t.Fatalf("no HTTP client: span %d..%d, want admission to return", s, e)
	}
}
