// Package status holds what the rule store reports of itself, as the
// admin API, the status page and `caddy sluice` read it: plain shapes,
// filled by package rulestore (which names them: rulestore.Status,
// rulestore.InvalidRule, ...) and its Redis source.
//
// It owns:
//
//   - the store's state: where rules come from, how fresh they are, and
//     its Redis client's connections (store.go);
//   - every instance's verdict on a rule's version, with its liveness,
//     and the rules not in force as expected: rejected, missing or
//     skipped (verdicts.go, rejected.go);
//   - the status page's overview and the propagation delay histogram
//     whose totals it shows (overview.go, propagation.go).
package status
