package monitoring_test

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// otlpReceiver is an OTLP/HTTP trace endpoint on loopback: it keeps every
// span exported to it.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "bad export", 400)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

// attributes returns the attributes of the span of trace id, if exported.
func (o *otlpReceiver) attributes(id []byte) (map[string]any, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if string(s.GetTraceId()) != string(id) || len(s.GetParentSpanId()) == 0 {
			continue
		}
		out := map[string]any{}
		for _, kv := range s.GetAttributes() {
			switch v := kv.GetValue(); {
			case v.GetStringValue() != "":
				out[kv.GetKey()] = v.GetStringValue()
			default:
				out[kv.GetKey()] = v.GetIntValue()
			}
		}
		return out, true
	}
	return nil, false
}

// TestDecisionsInTraces: with Caddy's `tracing` on, each handler adds its
// decision to the request's span, exported over OTLP/HTTP to a receiver
// in the test.
func TestDecisionsInTraces(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	// Read by Caddy's exporter when the tracing handler is provisioned.
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	s := startCaddy(t, "tracing {\n\t\tspan sluice\n\t}")

	// send makes one request in a trace of its own (a sampled parent from
	// the client) and returns the span's attributes once exported.
	send := func(path, user string) map[string]any {
		t.Helper()
		id := make([]byte, 16)
		rand.Read(id)
		parent := "00-" + hex.EncodeToString(id) + "-0102030405060708-01"
		testcaddy.Get(t, s.gateway+path, "X-User-Id: "+user, "traceparent: "+parent)
		var attrs map[string]any
		testcaddy.Eventually(t, 10*time.Second, "the span of "+path+" exported", func() bool {
			var ok bool
			attrs, ok = recv.attributes(id)
			return ok
		})
		return attrs
	}
	check := func(what string, attrs map[string]any, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if attrs[k] != v {
				t.Errorf("%s: span attribute %s = %v, want %v (all: %v)", what, k, attrs[k], v, attrs)
			}
		}
	}

	// The whole chain on one span.
	attrs := send("/chain", "alice")
	check("/chain", attrs, map[string]any{
		"sluice.ratelimit.rule": "roomy", "sluice.ratelimit.result": "allowed",
		"sluice.ratelimit.remaining": int64(999), "sluice.ratelimit.limit": int64(1000),
		"sluice.circuitbreaker.rule": "chain_cb", "sluice.circuitbreaker.state": "closed",
		"sluice.grayroute.rule": "checkout",
	})
	if v := attrs["sluice.grayroute.version"]; v != "v1" && v != "v2" {
		t.Errorf("/chain: sluice.grayroute.version = %v", v)
	}
	if _, ok := attrs["sluice.ratelimit.key"]; ok {
		t.Error("the span carries the rate limit key (it may identify a user)")
	}

	// A refusal: its result and retry_after.
	send("/tight", "bob")
	check("/tight refused", send("/tight", "bob"), map[string]any{
		"sluice.ratelimit.rule": "tight", "sluice.ratelimit.result": "rate_limited",
		"sluice.ratelimit.remaining": int64(0), "sluice.ratelimit.retry_after": int64(1),
	})

	// An open breaker.
	send("/flaky", "carol")
	send("/flaky", "carol")
	check("/flaky open", send("/flaky", "carol"), map[string]any{
		"sluice.circuitbreaker.rule": "flaky_cb", "sluice.circuitbreaker.state": "open",
	})
}
