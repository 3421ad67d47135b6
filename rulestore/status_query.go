package rulestore

import (
	"net/url"
)

// A StatusQuery answers GET /sluice/ui/{name}.json for the status page: a
// handler package's view that takes parameters (a page of breaker keys,
// say). It runs on an admin request and must bound its output.
type StatusQuery func(q url.Values) (any, error)

var statusQueries registry[StatusQuery]

// RegisterStatusQuery serves GET /sluice/ui/{name}.json with fn. Return an
// *ActionError to choose the status of a failure. Call it from init.
func RegisterStatusQuery(name string, fn StatusQuery) { statusQueries.put(name, fn) }

// LookupStatusQuery returns the query registered under name, or nil.
func LookupStatusQuery(name string) StatusQuery { return statusQueries.get(name) }
