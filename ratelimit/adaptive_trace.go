package ratelimit

import (
	"context"
	"net/http/httptrace"
	"sync/atomic"
)

// upstreamTimer times the upstream's part of a request from the HTTP
// client's trace hooks (reverse_proxy's round trip): from the moment the
// request was written to the upstream to the first byte of its answer. The
// adaptive limit measures that, not the time from admission: what the
// request spent inside the gateway before it reached the upstream (other
// handlers, a dial, the gateway's goroutines waiting for a CPU) and the
// time the client takes to read the body are no queue of the upstream's.
// Hooks run on the transport's goroutines, hence the atomics. With retries
// the last attempt counts.
type upstreamTimer struct {
	now              func() int64
	wrote, firstByte atomic.Int64
}

// trace returns ctx with t's hooks added to any already there.
func (t *upstreamTimer) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) {
			t.wrote.Store(t.now())
			t.firstByte.Store(0)
		},
		GotFirstResponseByte: func() {
			if t.firstByte.Load() == 0 {
				t.firstByte.Store(t.now())
			}
		},
	})
}

// span is the request's latency at the upstream, start to end; when the
// request never reached an upstream through an HTTP client (another
// handler answered it), the whole of admitted to returned.
func (t *upstreamTimer) span(admitted, returned int64) (start, end int64) {
	w, f := t.wrote.Load(), t.firstByte.Load()
	if w == 0 || f < w {
		return admitted, returned
	}
	return w, f
}
