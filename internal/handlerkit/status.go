package handlerkit

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// StatusWriter remembers the status of the response written through it, so
// a handler can judge the outcome of the handlers after it (the breaker's
// failure statuses, the canary analysis's errors).
type StatusWriter struct {
	caddyhttp.ResponseWriterWrapper
	// Status is the first final status written (200 for a body written
	// without one); 0 while nothing was written.
	Status int
}

// WriteHeader notes the first final status; 1xx are informational.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 {
		w.Status = code
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write notes an implicit 200.
func (w *StatusWriter) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriterWrapper.Write(p)
}
