package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/internal/fieldtable"
	"github.com/sluicegw/sluice/rulestore"
)

// The field table is the one list of the rule's fields: the reference table
// of docs/ratelimit.md shows its rows (name, syntax, default) in its order,
// the typed spec has exactly its names, and its literal defaults are the
// parser's.
func TestFieldTableMatchesTheDocsTheSpecAndTheParser(t *testing.T) {
	rows := fieldtable.RowsOf(fields)
	fieldtable.CheckDocs(t, "../docs/ratelimit.md", "## Rule fields", rulestore.RateLimit, rows)
	readTogether := map[string]bool{"quota": true, "period": true, "timezone": true, // parseCalendar
		"cost": true, "count_status": true, "response_cost": true, "reserve": true, "max_cost": true} // parseCost
	for _, f := range fields.Rows() {
		if (f.Parse == nil) != readTogether[f.Name] {
			t.Errorf("%s: parse is nil %v, want a parse of its own unless parseCalendar or parseCost reads it", f.Name, f.Parse == nil)
		}
	}

	needs := map[string]rulestore.Fields{
		"window_size":       {"limit_type": "sliding_window"},
		"timezone":          {"quota": "10", "period": "day"},
		"reserve":           {"response_cost": "{http.response.header.X-Tokens}"},
		"on_redis_error":    {"scope": "cluster"},
		"redis_timeout":     {"scope": "cluster"},
		"lease_size":        {"scope": "cluster"},
		"max_queue_wait":    {"control_behavior": "pace"},
		"max_queued":        {"control_behavior": "pace"},
		"cold_factor":       {"control_behavior": "warm_up", "warm_up_period": "30s"},
		"min_limit":         {"max_concurrent": "adaptive"},
		"max_limit":         {"max_concurrent": "adaptive"},
		"initial_limit":     {"max_concurrent": "adaptive"},
		"latency_tolerance": {"max_concurrent": "adaptive"},
		"sample_window":     {"max_concurrent": "adaptive"},
		"min_rtt_interval":  {"max_concurrent": "adaptive"},
		"priority":          {"max_concurrent": "adaptive"},
	}
	base := func(name string) rulestore.Fields {
		f := rulestore.Fields{"qps": "10"}
		for k, v := range needs[name] {
			f[k] = v
		}
		if f["quota"] != "" {
			delete(f, "qps")
		}
		return f
	}
	fieldtable.CheckDefaults(t, rows, func(f rulestore.Fields) (any, error) { return ParseRule("r", f) }, base, map[string]string{
		"burst": "a formula of qps",
		"cost":  "giving cost instead of requested_tokens names it in the errors (costField)",
	})
}
