package rulestore

import (
	"net/url"
	"sync"
)

// A StatusQuery answers GET /sluice/ui/{name}.json for the status page: a
// handler package's view that takes parameters (a page of breaker keys,
// say). It runs on an admin request and must bound its output.
type StatusQuery func(q url.Values) (any, error)

// statusQueries is a registry filled from init functions, like reporters.
var statusQueries struct {
	sync.Mutex
	m map[string]StatusQuery
}

// RegisterStatusQuery serves GET /sluice/ui/{name}.json with fn. Return an
// *ActionError to choose the status of a failure. Call it from init.
func RegisterStatusQuery(name string, fn StatusQuery) {
	statusQueries.Lock()
	defer statusQueries.Unlock()
	if statusQueries.m == nil {
		statusQueries.m = map[string]StatusQuery{}
	}
	statusQueries.m[name] = fn
}

func statusQuery(name string) StatusQuery {
	statusQueries.Lock()
	defer statusQueries.Unlock()
	return statusQueries.m[name]
}
