package grayroute_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// counter reads one sample from the admin endpoint's /metrics.
func counter(t *testing.T, admin int, series string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", admin))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

func TestMetricsCountRequestsByRuleAndVersion(t *testing.T) {
	opts := testcaddy.Options(t)
	var admin int
	if _, err := fmt.Sscanf(opts, "admin localhost:%d", &admin); err != nil {
		t.Fatal(err)
	}
	addr, url := site(t)
	cfg := fmt.Sprintf(`{
	%s
	rulestore {
		gray metrics-beta {
			match_tag      X-Beta
			target_version v2
		}
		gray metrics-keyed {
			match_tag      X-Keyed
			target_version v2
			weight         50
			hash_key       {http.request.header.X-Account}
		}
	}
}
%s {
	grayroute metrics-beta metrics-keyed {
		default_version metrics-default
	}
	%s
}`, opts, addr, echoSite)
	testcaddy.Run(t, cfg)

	beta := `sluice_grayroute_requests_total{rule="metrics-beta",version="v2"}`
	def := `sluice_grayroute_requests_total{rule="",version="metrics-default"}`
	random := `sluice_grayroute_random_assignments_total{rule="metrics-keyed"}`
	b0, d0, r0 := counter(t, admin, beta), counter(t, admin, def), counter(t, admin, random)
	for range 3 {
		get(t, url, "X-Beta: 1")
	}
	get(t, url)
	for range 4 {
		get(t, url, "X-Keyed: 1") // no X-Account: random split
	}
	get(t, url, "X-Keyed: 1", "X-Account: a1") // key present: not random
	if d := counter(t, admin, beta) - b0; d != 3 {
		t.Errorf("%s grew by %v, want 3", beta, d)
	}
	if d := counter(t, admin, def) - d0; d != 1 {
		t.Errorf("%s grew by %v, want 1", def, d)
	}
	if d := counter(t, admin, random) - r0; d != 4 {
		t.Errorf("%s grew by %v, want 4", random, d)
	}

	// A reload registers the metrics again without a panic and keeps counting.
	testcaddy.Reload(t, cfg)
	client.CloseIdleConnections()
	b1 := counter(t, admin, beta)
	get(t, url, "X-Beta: 1")
	if d := counter(t, admin, beta) - b1; d != 1 {
		t.Errorf("after reload %s grew by %v, want 1", beta, d)
	}
}
