package rulestore

import (
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
)

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
	return caddy.APIError{HTTPStatus: status, Err: errors.New(clipN(err.Error(), maxErrorText))}
}

// checkSize holds a rule written through Redis to the admin API's limit:
// a huge hash would be copied into every instance's memory, verdicts and
// history.
func checkSize(f Fields) error {
	if n := ruleSize(f); n > maxRuleBody {
		return fmt.Errorf("rule of %d bytes: over the limit of %d bytes", n, maxRuleBody)
	}
	return nil
}

// ruleSize is the size of a rule's raw fields: every name and value.
func ruleSize(f Fields) int {
	n := 0
	for name, v := range f {
		n += len(name) + len(v)
	}
	return n
}

// maxFeedback bounds each queue of feedback (verdicts, history entries,
// last-good writes) waiting to be written to Redis, if it stays unwritable.
const maxFeedback = 100_000
