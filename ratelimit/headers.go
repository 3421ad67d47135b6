package ratelimit

import (
	"bytes"
	"net/http"
	"strconv"
	"unsafe"
)

// rateHeaders is one response's rate limit header values in one
// allocation: the four values and the bytes of the two that change per
// request. The limit and policy values are the rule's, rendered once when
// it was parsed.
type rateHeaders struct {
	vals [4]string
	buf  [64]byte // `"<rule id>";r=<remaining>;t=<reset>`, when it fits
}

// appendRemaining appends a decision's RateLimit item,
// `"<rule id>";r=<remaining>;t=<seconds>`: t is the wait until the quota is
// whole again or the window ends, on a refusal at least the Retry-After.
func appendRemaining(b []byte, id string, d *Decision) []byte {
	reset := d.Reset
	if !d.OK() && d.RetryAfter > reset {
		reset = d.RetryAfter
	}
	b = append(b, '"')
	b = append(b, id...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(reset), 10)
}

// setHeaders sets X-RateLimit-Limit, X-RateLimit-Remaining,
// RateLimit-Policy and RateLimit for a decision with quota information.
func setHeaders(hdr http.Header, rule *Rule, d *Decision) {
	h := new(rateHeaders)
	b := appendRemaining(h.buf[:0], rule.ID, d)
	from := len(rule.ID) + len(`"";r=`)
	to := from + bytes.IndexByte(b[from:], ';')
	// b (h.buf, or a new array when a long rule id outgrew it) is never
	// written again, so it can back strings; the remaining count is a
	// slice of the RateLimit value.
	rl := unsafe.String(unsafe.SliceData(b), len(b))
	l := d.Limits
	policy := l.Policy
	if d.Cal != nil {
		policy = calendarPolicy(rule.ID, l, d.Cal)
	}
	h.vals = [4]string{l.QuotaStr, rl[from:to], policy, rl}
	// Each slice's capacity is 1, so a later Add to one header copies
	// instead of overwriting the next.
	hdr["X-Ratelimit-Limit"] = h.vals[0:1:1]
	hdr["X-Ratelimit-Remaining"] = h.vals[1:2:2]
	hdr["Ratelimit-Policy"] = h.vals[2:3:3]
	hdr["Ratelimit"] = h.vals[3:4:4]
}
