package grayroute_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// upstream is a real backend that answers with its version and the
// X-Target-Version header it received.
func upstream(t *testing.T, version string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", version, r.Header.Get("X-Target-Version"))
	}))
	t.Cleanup(s.Close)
	return s
}

// echoSite answers with what grayroute handed over to the rest of the route.
const echoSite = `respond "{http.vars.gray_version}|{http.grayroute.version}|{http.grayroute.rule}|{http.request.header.X-Target-Version}"`

func site(t *testing.T) (addr, url string) {
	port := testcaddy.FreePort(t)
	return fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d/", port)
}

// client is this test's own, so a test can drop its kept-alive connections
// after a reload (the old server closes them).
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// get returns the body for a GET with headers given as "Name: value".
func get(t *testing.T, url string, headers ...string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s %v: %d %s", url, headers, resp.StatusCode, body)
	}
	return body
}

func TestMatchSourcesFirstMatchAndDefault(t *testing.T) {
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		gray by-header {
			match_tag    X-Beta
			match_value  yes
			match_source header
			target_version v2
		}
	}
}
%s {
	grayroute {
		rule by-header
		gray by-query {
			match_tag      beta
			match_value    prefix:on
			match_source   query
			target_version v3
		}
		gray by-cookie {
			match_tag      cohort
			match_value    gold, silver
			match_source   cookie
			target_version v4
		}
		gray anywhere {
			match_tag      X-Beta
			match_value    regex:^(yes|maybe)$
			target_version v5
		}
		default_version stable
	}
	%s
}`, testcaddy.Options(t), addr, echoSite))

	for _, c := range []struct {
		name    string
		path    string
		headers []string
		want    string
	}{
		{"no tag: default version", "", nil, "stable|stable||stable"},
		{"header match", "", []string{"X-Beta: yes"}, "v2|v2|by-header|v2"},
		{"query match (prefix)", "?beta=only", nil, "v3|v3|by-query|v3"},
		{"cookie match (list)", "", []string{"Cookie: a=1; cohort=silver"}, "v4|v4|by-cookie|v4"},
		{"cookie outside the list", "", []string{"Cookie: cohort=bronze"}, "stable|stable||stable"},
		{"first match wins: header rule before query rule", "?beta=on", []string{"X-Beta: yes"}, "v2|v2|by-header|v2"},
		{"any source: query then regex rule", "?X-Beta=maybe", nil, "v5|v5|anywhere|v5"},
		{"client-sent X-Target-Version is overwritten", "", []string{"X-Target-Version: v9"}, "stable|stable||stable"},
		{"client-sent X-Target-Version is overwritten on a match", "", []string{"X-Target-Version: v9", "X-Beta: yes"}, "v2|v2|by-header|v2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := get(t, url+c.path, c.headers...); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestVarsMatcherRoutesToPerVersionUpstream(t *testing.T) {
	v1, v2 := upstream(t, "v1"), upstream(t, "v2")
	addr, url := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
}
%s {
	grayroute {
		gray beta {
			match_tag      X-Beta
			match_value    yes
			target_version v2
		}
	}
	@v2 vars gray_version v2
	handle @v2 {
		reverse_proxy %s
	}
	handle {
		reverse_proxy %s
	}
}`, testcaddy.Options(t), addr, v2.URL, v1.URL))

	if got := get(t, url, "X-Beta: yes", "X-Target-Version: v1"); got != "v2|v2" {
		t.Errorf("beta user: got %q, want v2 upstream with X-Target-Version v2", got)
	}
	if got := get(t, url, "X-Target-Version: v2"); got != "v1|v1" {
		t.Errorf("ordinary user claiming v2: got %q, want v1 upstream with X-Target-Version v1", got)
	}
}

func TestHeaderOffAndCustomName(t *testing.T) {
	v1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s", r.Header.Get("X-Target-Version"), r.Header.Get("X-Canary"))
	}))
	defer v1.Close()
	addr, url := site(t)
	addr2, url2 := site(t)
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		gray all {
			target_version v2
		}
	}
}
%s {
	grayroute all {
		header off
	}
	reverse_proxy %s
}
%s {
	grayroute all {
		header X-Canary
	}
	reverse_proxy %s
}`, testcaddy.Options(t), addr, v1.URL, addr2, v1.URL))
	if got := get(t, url, "X-Target-Version: mine"); got != "mine|" {
		t.Errorf("header off: upstream saw %q, want the client's header untouched and no X-Canary", got)
	}
	if got := get(t, url2, "X-Canary: v9"); got != "|v2" {
		t.Errorf("header X-Canary: upstream saw %q, want X-Canary v2", got)
	}
}

// weightSite is a Caddyfile with one weight-only canary rule.
func weightSite(opts, addr, weight string) string {
	return fmt.Sprintf(`{
	%s
	rulestore {
		gray checkout-canary {
			target_version v2
			weight         %s
		}
	}
}
%s {
	grayroute checkout-canary
	%s
}`, opts, weight, addr, echoSite)
}

func version(body string) string { v, _, _ := strings.Cut(body, "|"); return v }

func TestWeightSplitsByStableUserHash(t *testing.T) {
	addr, url := site(t)
	opts := testcaddy.Options(t)
	testcaddy.Run(t, weightSite(opts, addr, "20"))

	const users = 1000
	at20 := make([]bool, users)
	canary := 0
	for i := range users {
		uid := fmt.Sprintf("u-%d", i)
		got := version(get(t, url, "X-User-Id: "+uid))
		at20[i] = got == "v2"
		if at20[i] {
			canary++
		}
		// Caddy's answer is exactly the documented bucketing function.
		want := grayroute.InCanary(grayroute.Bucket("checkout-canary", []byte("user:"+uid)), 2000)
		if at20[i] != want {
			t.Fatalf("user %s: got %s, bucket function says canary=%v", uid, got, want)
		}
	}
	if share := float64(canary) * 100 / users; math.Abs(share-20) > 4 {
		t.Errorf("weight 20: %.1f%% of %d users on v2", share, users)
	}

	// The same user keeps the same version request after request.
	for range 20 {
		if got := version(get(t, url, "X-User-Id: u-7")); (got == "v2") != at20[7] {
			t.Fatal("user u-7 flipped version between requests")
		}
	}

	// Raising the weight keeps every canary user on the canary.
	testcaddy.Reload(t, weightSite(opts, addr, "50"))
	client.CloseIdleConnections()
	canary = 0
	for i := range users {
		v2 := version(get(t, url, fmt.Sprintf("X-User-Id: u-%d", i))) == "v2"
		if at20[i] && !v2 {
			t.Fatalf("user u-%d was on the canary at weight 20 and left it at weight 50", i)
		}
		if v2 {
			canary++
		}
	}
	if share := float64(canary) * 100 / users; math.Abs(share-50) > 5 {
		t.Errorf("weight 50: %.1f%% of %d users on v2", share, users)
	}
}

func TestClientIPIsTheFallbackHashKey(t *testing.T) {
	addr, url := site(t)
	testcaddy.Run(t, weightSite(testcaddy.Options(t), addr, "50"))
	want := grayroute.InCanary(grayroute.Bucket("checkout-canary", []byte("ip:127.0.0.1")), 5000)
	for range 10 {
		if got := version(get(t, url)) == "v2"; got != want {
			t.Fatalf("no X-User-Id: canary=%v, want the client IP's bucket (canary=%v)", got, want)
		}
	}
}

func TestSameUserSameVersionOnTwoInstancesAndAfterRestart(t *testing.T) {
	addrA, urlA := site(t)
	addrB, urlB := site(t)
	cfg := func(addr string) string {
		return weightSite("admin localhost:{{admin}}\n\tpersist_config off", addr, "30")
	}
	a := testcaddy.Start(t, cfg(addrA))
	testcaddy.Start(t, cfg(addrB))

	const users = 300
	first := make([]string, users)
	for i := range users {
		h := fmt.Sprintf("X-User-Id: user-%d", i)
		first[i] = version(get(t, urlA, h))
		if b := version(get(t, urlB, h)); b != first[i] {
			t.Fatalf("user-%d: instance A says %s, instance B says %s", i, first[i], b)
		}
	}
	a.Restart(cfg(addrA))
	client.CloseIdleConnections()
	for i := range users {
		if got := version(get(t, urlA, fmt.Sprintf("X-User-Id: user-%d", i))); got != first[i] {
			t.Fatalf("user-%d: %s before the restart, %s after", i, first[i], got)
		}
	}
}
