package admin

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// Every class of store error has its admin API status, and the answer
// keeps the store's text.
func TestStoreErrorStatus(t *testing.T) {
	want := map[rulestore.ErrorClass]int{
		rulestore.ErrInvalid:            http.StatusBadRequest,
		rulestore.ErrNotFound:           http.StatusNotFound,
		rulestore.ErrConflict:           http.StatusConflict,
		rulestore.ErrPreconditionFailed: http.StatusPreconditionFailed,
		rulestore.ErrUnsupported:        http.StatusNotImplemented,
		rulestore.ErrBackend:            http.StatusBadGateway,
	}
	classes := rulestore.ErrorClasses()
	if len(classes) != len(want) {
		t.Fatalf("the store has %d error classes %v, the test knows %d: give the new one its status here and in storeStatus",
			len(classes), classes, len(want))
	}
	for _, c := range classes {
		status, ok := want[c]
		if !ok {
			t.Errorf("class %q: no status in the test", c)
			continue
		}
		if got := storeStatus(c); got != status {
			t.Errorf("class %q: status %d, want %d", c, got, status)
		}
		// Wrapped once more, as a caller may: the outermost class still counts.
		err := fmt.Errorf("outer: %w", rulestore.Errorf(c, "rule %q: %s", "r1", "why"))
		var ae caddy.APIError
		if !errors.As(storeAPIError(err), &ae) || ae.HTTPStatus != status || ae.Err.Error() != `outer: rule "r1": why` {
			t.Errorf("class %q: answer %#v, want status %d with the text unchanged", c, storeAPIError(err), status)
		}
		if !errors.Is(err, c) {
			t.Errorf("class %q: errors.Is does not see it", c)
		}
	}

	// Errors the store did not classify, and answers already made, pass as they are.
	plain := errors.New("plain")
	if got := storeAPIError(plain); got != plain {
		t.Errorf("unclassified error: %#v, want it unchanged", got)
	}
	made := caddy.APIError{HTTPStatus: http.StatusForbidden, Err: rulestore.Errorf(rulestore.ErrInvalid, "x")}
	if got, ok := storeAPIError(made).(caddy.APIError); !ok || got.HTTPStatus != http.StatusForbidden {
		t.Errorf("an APIError: %#v, want it unchanged", storeAPIError(made))
	}
	if storeAPIError(nil) != nil {
		t.Error("nil: want nil")
	}
}
