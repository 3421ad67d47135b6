// Package answer writes what a client of a rate limited route is told,
// once package ratelimit has decided its request: plain formatting, no
// decision and no state. Package ratelimit chooses the rules a response
// reports and lists several rules' items (its multi_headers.go), and
// answers refusals (its reject.go).
//
// It owns:
//
//   - the RateLimit and RateLimit-Policy values (the IETF draft's) and
//     X-RateLimit-Limit and -Remaining of one rule's decision, set in one
//     allocation (headers.go);
//   - the RateLimit-Policy item of a calendar window, and the rounding of
//     a wait up to whole seconds for RateLimit's t= and Retry-After
//     (headers.go);
//   - a refusal's body, with a JSON content type when it looks like JSON
//     (body.go).
package answer
