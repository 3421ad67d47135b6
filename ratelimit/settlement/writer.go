package settlement

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// StatusClientClosed is the status logged for a request whose client went
// away before its answer (nginx's 499); nothing reaches the client.
const StatusClientClosed = 499

// Ending is how a settled request ended.
type Ending uint8

const (
	Finished   Ending = iota // the handlers returned with the answer whole
	Cut                      // the answer began and was cut short
	Unanswered               // the client left before any answer
)

// A Settler charges a request's key once its writer knows how the
// response ended (Writer.End, Writer.Status, its header and trailer).
type Settler interface {
	Settle(w *Writer)
}

// Writer notes the response of a settling request and has its Settler
// charge it once, by the response's status.
type Writer struct {
	caddyhttp.ResponseWriterWrapper
	req      *http.Request // for its context: is the client still there?
	settler  Settler
	byStatus bool // settle as soon as the status is known (no response cost to wait for)
	// Status is the response's first final status, 0 before it.
	Status int
	// End is how the request ended.
	End     Ending
	settled bool
}

// Begin readies w for request r answered through rw: s settles it, at the
// status when byStatus, else once the response is done.
func (w *Writer) Begin(rw http.ResponseWriter, r *http.Request, byStatus bool, s Settler) {
	*w = Writer{req: r, settler: s, byStatus: byStatus}
	w.ResponseWriterWrapper.ResponseWriter = rw
}

// Done settles the request, if its status did not already, as it ended:
// returned false means the handlers panicked (the proxy's
// http.ErrAbortHandler when the client hangs up mid-stream, or any
// other), which goes on after this; err is what they returned.
func (w *Writer) Done(err error, returned bool) {
	if w.settled {
		return
	}
	switch {
	case w.Status == 0 && (!returned || w.req.Context().Err() != nil):
		w.End = Unanswered
	case w.Status == 0:
		w.Status = ErrorStatus(err) // Caddy answers the error
	case !returned || err != nil:
		w.End = Cut
	}
	w.settle()
}

// WriteHeader notes the first final status (1xx are informational) and,
// without a response_cost to wait for, settles by it. The proxy's 499
// with the client gone records that the client left before the answer:
// no status of the upstream's.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 {
		if code == StatusClientClosed && w.req.Context().Err() != nil {
			w.End = Unanswered
		} else {
			w.Status = code
		}
		if w.byStatus || w.End == Unanswered {
			w.settle()
		}
	}
	w.ResponseWriterWrapper.WriteHeader(code)
}

// Write notes an implicit 200.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Status == 0 && w.End == Finished {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriterWrapper.Write(p)
}

func (w *Writer) settle() {
	w.settled = true
	w.settler.Settle(w)
}

// ErrorStatus is the status Caddy answers for a handler's error (500 when
// the error carries none); 200 for no error and nothing written.
func ErrorStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var he caddyhttp.HandlerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		return he.StatusCode
	}
	return http.StatusInternalServerError
}
