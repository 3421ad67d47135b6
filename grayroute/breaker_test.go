package grayroute_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/rulestore"
)

// A per-version breaker (key {http.vars.gray_version}) in front of a failing
// v2 opens; with fallback_on_open, canary-bound users then get v1, and the
// breaker no longer sees their requests.
func TestFallbackWhenCanaryBreakerIsOpen(t *testing.T) {
	v2, v2calls := brokenV2(t)
	v1 := upstream(t, "v1")
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		circuit_breaker v2-breaker {
			key               {http.vars.gray_version}
			failure_threshold 3
			open_duration     1m
		}
		gray canary {
			target_version   v2
			fallback_version v1
			fallback_on_open v2-breaker
		}
	}
}
%s {
	grayroute canary
	@v2 vars gray_version v2
	handle @v2 {
		circuitbreaker v2-breaker
		reverse_proxy %s
	}
	handle {
		reverse_proxy %s
	}
}`, testcaddy.Options(t), addr, v2.URL, v1.URL))

	status := func() int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-User-Id", "canary-user")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Weight 100: the canary user reaches the failing v2 until its breaker opens.
	if s := status(); s != http.StatusInternalServerError {
		t.Fatalf("first request: status %d, want v2's 500", s)
	}
	testcaddy.Eventually(t, 10*time.Second, "the v2 breaker to open and the canary user to fall back to v1", func() bool {
		return status() == http.StatusOK
	})
	if got := get(t, url, "X-User-Id: canary-user"); got != "v1|v1" {
		t.Fatalf("breaker open: got %q, want the v1 upstream with X-Target-Version v1", got)
	}
	before := v2calls.Load()
	for range 10 {
		get(t, url, "X-User-Id: another-user")
	}
	if n := v2calls.Load() - before; n != 0 {
		t.Errorf("v2 got %d requests while its breaker was open", n)
	}
}

// When the breaker's open time is over, canary users go back to v2 (their
// buckets never changed), and once v2 is healthy again they stay there.
func TestCanaryReturnsAfterBreakerRecovers(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	v2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "v2 is broken", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "v2|", r.Header.Get("X-Target-Version"))
	}))
	defer v2.Close()
	v1 := upstream(t, "v1")
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		circuit_breaker v2-breaker-recovery {
			key               {http.vars.gray_version}
			failure_threshold 2
			open_duration     200ms
		}
		gray canary {
			target_version   v2
			fallback_on_open v2-breaker-recovery
		}
	}
}
%s {
	grayroute canary
	@v2 vars gray_version v2
	handle @v2 {
		circuitbreaker v2-breaker-recovery
		reverse_proxy %s
	}
	handle {
		reverse_proxy %s
	}
}`, testcaddy.Options(t), addr, v2.URL, v1.URL))

	body := func() string { return canaryBody(t, url) }
	testcaddy.Eventually(t, 10*time.Second, "the open breaker to send the canary user to v1", func() bool {
		return body() == "v1|v1"
	})
	broken.Store(false)
	testcaddy.Eventually(t, 10*time.Second, "the canary user back on the healthy v2", func() bool {
		return body() == "v2|v2"
	})
	for range 10 {
		if got := body(); got != "v2|v2" {
			t.Fatalf("after recovery: got %q, want v2", got)
		}
	}
}

// The breaker state outlives a reload: the next config's fallback_on_open
// sees the breaker its predecessor opened, and the old config's store,
// asked during the reload, gives the same answer as the new one's.
func TestFallbackSeesTheBreakerAcrossAReload(t *testing.T) {
	v2, v2calls := brokenV2(t)
	v1 := upstream(t, "v1")
	addr, url := site(t)
	config := func(defaultVersion string) string {
		return fmt.Sprintf(`{
	%s
	rulestore {
		circuit_breaker v2-breaker-reload {
			key               {http.vars.gray_version}
			failure_threshold 2
			open_duration     1h
		}
		gray canary {
			target_version   v2
			fallback_version v1
			fallback_on_open v2-breaker-reload
		}
	}
}
%s {
	grayroute {
		rule            canary
		default_version %s
	}
	@v2 vars gray_version v2
	handle @v2 {
		circuitbreaker v2-breaker-reload
		reverse_proxy %s
	}
	handle {
		reverse_proxy %s
	}
}`, testcaddy.Options(t), addr, defaultVersion, v2.URL, v1.URL)
	}
	testcaddy.Run(t, config("v1"))
	testcaddy.Eventually(t, 10*time.Second, "the v2 breaker to open and the canary user to fall back to v1", func() bool {
		return canaryBody(t, url) == "v1|v1"
	})
	old := rulestore.Active().Breakers()

	// A second config, loaded after the first: another default version.
	testcaddy.Reload(t, config("v0"))
	client.CloseIdleConnections()
	if rulestore.Active().Breakers() == old {
		t.Fatal("the reload kept the old store's breaker states")
	}
	before := v2calls.Load()
	if got := canaryBody(t, url); got != "v1|v1" {
		t.Fatalf("after the reload the canary user got %q, want the fallback v1 (the breaker is still open)", got)
	}
	if n := v2calls.Load() - before; n != 0 {
		t.Errorf("v2 got %d requests after the reload while its breaker was open", n)
	}
	if !rulestore.Active().Breakers().IsOpen("v2-breaker-reload", "v2") || !old.IsOpen("v2-breaker-reload", "v2") {
		t.Error("the new or the old config's store does not see the v2 breaker open")
	}
}

// canaryBody is the body a canary-bound user gets, whatever the status.
func canaryBody(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-User-Id", "canary-user")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 64)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}

// brokenV2 is a v2 upstream that fails every call, and its count of calls.
func brokenV2(t *testing.T) (*httptest.Server, *atomic.Int64) {
	calls := new(atomic.Int64)
	v2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "v2 is broken", http.StatusInternalServerError)
	}))
	t.Cleanup(v2.Close)
	return v2, calls
}
