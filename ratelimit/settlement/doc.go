// Package settlement is what a settling rule (count_status, response_cost)
// needs of a response, apart from the rule and the engines: how the
// response ended, its status and the cost it reported. Package ratelimit
// charges the key (its settle.go), the engines keep the debt.
//
// Settling: a rule with count_status admits a request when its key holds
// the request's cost, spends nothing up front, and charges the cost once
// the response is done, if its status is one counted. The charge may take
// the key below zero (debt): the key's next requests are refused until the
// refill (or the window sliding on) has paid it back.
//
// An admitted request of a settling rule is served through a settle
// writer, which charges its key however the request ends (Writer.Done): a
// finished answer by its status and reported cost, an answer cut short
// (the client hung up mid-stream, the handler panicked or failed after the
// answer began) by the cost reported so far or else max_cost, and a
// request whose client left before any answer by what its admission took.
// A count_status rule is charged as soon as the response's status is known
// (before any byte of it leaves), so a client cannot send its next request
// before the charge.
//
// It owns:
//
//   - the writer that notes a response's status and how it ended, and
//     calls its Settler once (writer.go);
//   - the status Caddy answers for a handler's error (writer.go);
//   - the cost a response reports in its header or trailer, read without
//     allocating (cost.go).
package settlement
