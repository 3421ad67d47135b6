package admin

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// The store answers in error classes; this file alone turns them into the
// admin API's statuses.

// storeStatus is the status of a store error of class c (0: none known).
func storeStatus(c rulestore.ErrorClass) int {
	switch c {
	case rulestore.ErrInvalid:
		return http.StatusBadRequest // 400
	case rulestore.ErrNotFound:
		return http.StatusNotFound // 404
	case rulestore.ErrConflict:
		return http.StatusConflict // 409
	case rulestore.ErrPreconditionFailed:
		return http.StatusPreconditionFailed // 412
	case rulestore.ErrUnsupported:
		return http.StatusNotImplemented // 501
	case rulestore.ErrBackend:
		return http.StatusBadGateway // 502
	}
	return 0
}

// storeAPIError gives a store error (*rulestore.Error) its status, text
// unchanged; any other error, a caddy.APIError among them, passes as is.
func storeAPIError(err error) error {
	var ae caddy.APIError
	if err == nil || errors.As(err, &ae) {
		return err
	}
	if status := storeStatus(rulestore.ClassOf(err)); status != 0 {
		return caddy.APIError{HTTPStatus: status, Err: err}
	}
	return err
}

// applyStatus is the status of an apply's answer: 200 when the set is (or
// would be) written, else its failure's.
func applyStatus(res rulestore.ApplyResult) int {
	if err := res.Failure(); err != nil {
		return storeStatus(rulestore.ClassOf(err))
	}
	return http.StatusOK
}

// actionAPIError is the admin API's answer to a failed action or view: the
// status an ActionError carries, else 400.
func actionAPIError(err error) error {
	status := http.StatusBadRequest
	var ae *rulestore.ActionError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	return caddy.APIError{HTTPStatus: status, Err: err}
}
