package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
	"github.com/sluicegw/sluice/ratelimit"
	"github.com/sluicegw/sluice/rulestore"
)

// usageUpstream reports the tokens a request used, n from the query: in
// the X-Tokens-Used header (/use), or in the trailer of that name after a
// flushed, streamed body (/stream).
func usageUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.URL.Query().Get("n")
		if r.URL.Path == "/stream" {
			w.Header().Set("Trailer", "X-Tokens-Used")
			for i := 0; i < 3; i++ {
				_, _ = w.Write([]byte("chunk\n"))
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Tokens-Used", n)
			return
		}
		if n != "" {
			w.Header().Set("X-Tokens-Used", n)
		}
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(up.Close)
	return up
}

const responseCostSite = `
	ratelimit {
		qps 0.001
		burst 100
		key_resolver global
		response_cost {http.response.header.X-Tokens-Used}
		reserve 10
		max_cost 50
		%s
	}
	reverse_proxy %s`

// Each request takes the reserve (10) up front and is settled by what the
// upstream reports: extra charged, the rest refunded, a report above
// max_cost clipped to it, no report leaving the reserve; a key that cannot
// cover the reserve is refused.
var responseCostSteps = []struct {
	path   string
	status int
	left   string // X-RateLimit-Remaining at admission
}{
	{"/use?n=30", 200, "90"},   // then charged 20 more: 70
	{"/stream?n=5", 200, "60"}, // then refunded 5: 65
	{"/use?n=999", 200, "55"},  // clipped to 50, charged 40 more: 15
	{"/use", 200, "5"},         // no report: the reserve stands, 5
	{"/use?n=0", 429, ""},      // 5 cannot cover the reserve
}

func TestResponseCostSettlesReserve(t *testing.T) {
	up := usageUpstream(t)
	s := caddyfile(t, "", fmt.Sprintf(responseCostSite, "", up.URL))
	testcaddy.Run(t, s.cfg)
	for i, st := range responseCostSteps {
		resp, body := testcaddy.Get(t, s.urls[0]+st.path)
		if resp.StatusCode != st.status {
			t.Fatalf("step %d %s: %d %q, want %d", i+1, st.path, resp.StatusCode, body, st.status)
		}
		if st.left != "" && resp.Header.Get("X-RateLimit-Remaining") != st.left {
			t.Fatalf("step %d %s: remaining %q, want %s", i+1, st.path, resp.Header.Get("X-RateLimit-Remaining"), st.left)
		}
		if st.path == "/stream?n=5" && (body != "chunk\nchunk\nchunk\n" || resp.Trailer.Get("X-Tokens-Used") != "5") {
			t.Fatalf("stream: body %q trailer %v", body, resp.Trailer)
		}
	}
}

// With scope cluster the settlements go to the key's state in Redis: it
// ends at the same 5 tokens.
func TestResponseCostCluster(t *testing.T) {
	rd := redistest.Start(t)
	up := usageUpstream(t)
	s := caddyfile(t, "\trulestore {\n\t\tredis "+rd.URL()+"\n\t}",
		fmt.Sprintf(responseCostSite, "scope cluster\n\t\tredis_timeout 2s\n\t\ton_redis_error deny", up.URL))
	testcaddy.Run(t, s.cfg)
	for i, st := range responseCostSteps[:4] {
		if got := status(t, s.urls[0]+st.path); got != st.status {
			t.Fatalf("step %d %s: %d, want %d", i+1, st.path, got, st.status)
		}
	}
	// The last settlement rides in the client's next batch, not awaited.
	testcaddy.Eventually(t, 5*time.Second, "the settlements in redis", func() bool {
		n, ok := redisTokens(rd, "ratelimit:tb2:*")
		return ok && n >= 5 && n < 5.1
	})
	if got := status(t, s.urls[0]+"/use?n=0"); got != http.StatusTooManyRequests {
		t.Fatalf("with 5 left and a reserve of 10: %d, want 429", got)
	}
}

func TestResponseCostFieldErrors(t *testing.T) {
	for _, c := range []struct {
		fields rulestore.Fields
		field  string
	}{
		{rulestore.Fields{"response_cost": "{http.request.header.N}"}, "response_cost"},
		{rulestore.Fields{"response_cost": "{http.response.header.N}", "cost": "2"}, "response_cost"},
		{rulestore.Fields{"reserve": "3"}, "reserve"},
		{rulestore.Fields{"response_cost": "{http.response.header.N}", "reserve": "20", "max_cost": "10"}, "reserve"},
		{rulestore.Fields{"response_cost": "{http.response.header.N}", "max_cost": "101"}, "max_cost"},
	} {
		f := rulestore.Fields{"qps": "1", "burst": "100"}
		for k, v := range c.fields {
			f[k] = v
		}
		if _, err := ratelimit.ParseRule("r", f); err == nil || !strings.Contains(err.Error(), "field "+c.field) {
			t.Errorf("%v: error %v, want one naming %s", c.fields, err, c.field)
		}
	}
}
