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
