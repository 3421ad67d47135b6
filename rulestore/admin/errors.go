package admin

import (
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

func apiError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// maxErrorText bounds an admin API error message: values from a request or
// from Redis are echoed clipped, never whole.
const maxErrorText = 1024

// clipAPIError cuts an admin API error's message to maxErrorText.
func clipAPIError(err error) error {
	if err == nil || len(err.Error()) <= maxErrorText {
		return err
	}
	status := 500
	var ae caddy.APIError
	if errors.As(err, &ae) {
		status = ae.HTTPStatus
	}
	return caddy.APIError{HTTPStatus: status, Err: errors.New(rulestore.Clip(err.Error(), maxErrorText))}
}
