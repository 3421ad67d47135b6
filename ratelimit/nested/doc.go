// Package nested decides spends over a tree of budgets (API key → team →
// organisation) with guaranteed shares and borrowing, in the manner of
// Linux's HTB: a request spends at every level of its path, all or none.
// It is plain Go, with no Caddy and no Redis: times are passed in, and
// each node's state is a few numbers the caller keeps (in memory, or
// later in a Redis hash that one script reads and writes).
//
// It owns:
//
//   - a node's ceiling, its guarantee and its state (limit.go, state.go):
//     a token bucket or a calendar quota, a share of the parent's rate or
//     quota, and the flat numbers that hold both;
//   - what each node's children's guarantees are shares of: its own
//     guarantee, handed down, or its ceiling (share.go);
//   - the decision of one spend along a path, its refusals and its
//     per-level outcome, and reading a path's use without spending
//     (spend.go, lend.go, outcome.go);
//   - the check that one parent's children's guarantees add up to at most
//     100 % (validate.go).
//
// The semantics and their bounds are in docs/design/nested-quotas.md.
package nested
