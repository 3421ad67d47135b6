// Package settlement is what a settling rule (count_status, response_cost)
// needs of a response apart from the rule, its key and the engines: how
// the response ended, the status it was answered with and the cost it
// reported. Package ratelimit's settle writer (its settle.go) notes the
// response and charges the key; the engines keep the debt.
//
// It owns:
//
//   - how a settled request ended: finished, cut short, or unanswered
//     because its client left (status.go);
//   - the status Caddy answers for a handler's error, and the 499 logged
//     for a client that left (status.go);
//   - the cost a response reports in its header or trailer, read without
//     allocating (cost.go).
package settlement
