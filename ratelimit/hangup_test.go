package ratelimit_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// A client that hangs up never pays less than one that reads the whole
// answer. The upstream streams 20 chunks and reports 900 tokens in a
// trailer (or, in "header", in a header before the body); the rule's
// reserve is 10 and max_cost 1000. The client resets its connection after
// the last chunk (before the trailer), after 19 chunks, or right after the
// headers; the cut rule charges what was reported so far, else max_cost.

// Cut responses by how the client leaves: the bytes it reads before its
// reset, the charge the key must end with.
var hangups = []struct {
	mode   string // the upstream's query
	until  string // the client resets once it has read this; "" reads all
	charge float64
}{
	{"full", "", 900},
	{"trailer", "c19\n", 1000},  // all 20 chunks, no trailer: max_cost
	{"trailer", "c18\n", 1000},  // 19 of 20
	{"header", "\r\n\r\n", 900}, // the headers carried the cost
}

// streamingUpstream streams c00…c19. Unless full, it waits after the
// chunks (or, in "header", after the first) for its request to end, which
// the proxy does once the client is gone, so no trailer is sent.
func streamingUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := r.URL.Query().Get("mode")
		if mode == "header" {
			w.Header().Set("X-Tokens-Used", "900")
		} else {
			w.Header().Set("Trailer", "X-Tokens-Used")
		}
		f := w.(http.Flusher)
		for i := 0; i < 20; i++ {
			fmt.Fprintf(w, "c%02d\n", i)
			f.Flush()
			if mode == "header" && i == 0 {
				break
			}
		}
		if mode != "full" {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.Header().Set("X-Tokens-Used", "900")
	}))
	t.Cleanup(up.Close)
	return up
}

// hangUp sends GET path as user and resets the connection once the answer
// holds until (reads all when until is ""); it returns what it read.
func hangUp(t *testing.T, base, path, user, until string) string {
	t.Helper()
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nX-User: %s\r\nTE: trailers\r\n", path, u.Host, user)
	if until == "" {
		fmt.Fprint(conn, "Connection: close\r\n\r\n")
	} else {
		fmt.Fprint(conn, "\r\n")
	}
	var got bytes.Buffer
	rd := bufio.NewReader(conn)
	buf := make([]byte, 4096)
	for until == "" || !strings.Contains(got.String(), until) {
		n, err := rd.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if until != "" {
				t.Fatalf("%s: the answer ended before %q: %v\n%s", path, until, err, got.String())
			}
			break
		}
	}
	if until != "" {
		conn.(*net.TCPConn).SetLinger(0) // a reset, as a client that goes away
	}
	return got.String()
}

// hangupSite is a rule charged by response_cost with the key from X-User
// (stored as key0:<user>, the first alternative of the key).
func hangupSite(id, limit, scope, upstream string) string {
	return fmt.Sprintf(`
	ratelimit {
		id %s
		%s
		key_resolver {http.request.header.X-User}
		response_cost {http.response.header.X-Tokens-Used}
		reserve 10
		max_cost 1000
		%s
	}
	reverse_proxy %s`, id, limit, scope, upstream)
}

func TestHangingUpNeverCostsLess(t *testing.T) {
	perKind := 3
	if os.Getenv("SLUICE_SOAK") != "" {
		perKind = 1000
	}
	rd := redistest.Start(t)
	up := streamingUpstream(t)
	tb, cal := "qps 0.04\n\t\tburst 1000000", "quota 1000000\n\t\tperiod day"
	cluster := "scope cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny"
	rules := []struct{ id, limit, scope string }{
		{"hang_tb", tb, ""}, {"hang_cal", cal, ""},
		{"hang_tb_cluster", tb, cluster}, {"hang_cal_cluster", cal, cluster},
	}
	sites := make([]string, 0, len(rules)+1)
	routes := make([][]string, 0, len(rules)+1) // each site's rules
	for _, r := range rules {
		sites = append(sites, hangupSite(r.id, r.limit, r.scope, up.URL))
		routes = append(routes, []string{r.id})
	}
	// Several limits on one route, each settled by the response.
	sites = append(sites, "\tratelimit hang_multi_tb hang_multi_cal\n\treverse_proxy "+up.URL)
	routes = append(routes, []string{"hang_multi_tb", "hang_multi_cal"})
	var declared strings.Builder
	for _, d := range []struct{ id, limit string }{{"hang_multi_tb", tb}, {"hang_multi_cal", cal}} {
		fmt.Fprintf(&declared, "\t\trate_limit %s {\n\t\t\t%s\n\t\t\tkey_resolver {http.request.header.X-User}\n"+
			"\t\t\tresponse_cost {http.response.header.X-Tokens-Used}\n\t\t\treserve 10\n\t\t\tmax_cost 1000\n\t\t}\n",
			d.id, strings.ReplaceAll(d.limit, "\n\t\t", "\n\t\t\t"))
	}
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n"+declared.String()+"\t}", sites...)
	testcaddy.Run(t, s.cfg)
	for i, ids := range routes {
		for hi, h := range hangups {
			for n := 0; n < perKind; n++ {
				user := fmt.Sprintf("u%d-%d-%d", i, hi, n)
				got := hangUp(t, s.urls[i], "/?mode="+h.mode, user, h.until)
				if !strings.HasPrefix(got, "HTTP/1.1 200") {
					t.Fatalf("%v %s: %q", ids, h.mode, got)
				}
				for _, id := range ids {
					if used := waitUsed(t, s.adminPort, id, "key0:"+user, h.charge); used != h.charge {
						t.Fatalf("%s, %s cut at %q: charged %v, want %v", id, h.mode, h.until, used, h.charge)
					}
				}
			}
		}
	}
	t.Logf("%d responses of each of %d kinds on %d routes: each charged its rule's amount", perKind, len(hangups), len(routes))
}

// waitUsed waits up to 10 s for key's use of rule to round to want (the
// settlement of a cut response runs once the proxy gives up on it) and
// returns the last reading, rounded.
func waitUsed(t *testing.T, adminPort int, rule, key string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		used := math.Round(mustQuota(t, adminPort, rule, key).Used)
		if used == want || time.Now().After(deadline) {
			return used
		}
		time.Sleep(5 * time.Millisecond) // sleep: poll interval of the wait itself
	}
}

// A client that leaves before any answer is not charged by count_status:
// the 499 Caddy records is not a status the upstream answered. The
// request held the key's one in-flight slot, freed after its settlement,
// so a request admitted again for the key shows the settlement is done.
func TestClientGoneBeforeAnswerIsNotCounted(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	s := caddyfile(t, "", fmt.Sprintf(`
	ratelimit {
		id gone_login
		qps 0.001
		burst 5
		key_resolver {http.request.header.X-User}
		count_status 4xx
		max_concurrent 1
	}
	reverse_proxy %s`, up.URL))
	testcaddy.Run(t, s.cfg)
	u, _ := neturl.Parse(s.urls[0])
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /hold HTTP/1.1\r\nHost: %s\r\nX-User: mallory\r\n\r\n", u.Host)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	testcaddy.Eventually(t, 10*time.Second, "mallory's slot freed", func() bool {
		return status(t, s.urls[0]+"/ok", "X-User: mallory") == http.StatusOK
	})
	if used := mustQuota(t, s.adminPort, "gone_login", "key0:mallory").Used; used != 0 {
		t.Fatalf("a client gone before the answer was charged %v", used)
	}
}
