package answer

import (
	"bytes"
	"net/http"
	"strconv"
	"unsafe"

	"github.com/sluicegw/sluice/ratelimit/engine"
)

// rateHeaders is one response's rate limit header values in one
// allocation: the four values and the bytes of the two that change per
// request. The limit and policy values are the rule's, rendered once when
// it was parsed.
type rateHeaders struct {
	vals [4]string
	buf  [64]byte // `"<rule id>";r=<remaining>;t=<reset>`, when it fits
}

// AppendRemaining appends a decision's RateLimit item,
// `"<rule id>";r=<remaining>;t=<seconds>`: t is the wait until the quota is
// whole again or the window ends, on a refusal at least the Retry-After.
func AppendRemaining(b []byte, id string, d *engine.Decision) []byte {
	reset := d.Reset
	if !d.OK() && d.RetryAfter > reset {
		reset = d.RetryAfter
	}
	b = append(b, '"')
	b = append(b, id...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, CeilSeconds(reset), 10)
}

// Set sets X-RateLimit-Limit, X-RateLimit-Remaining, RateLimit-Policy
// and RateLimit for a decision of rule id with quota information.
func Set(hdr http.Header, id string, d *engine.Decision) {
	h := new(rateHeaders)
	b := AppendRemaining(h.buf[:0], id, d)
	from := len(id) + len(`"";r=`)
	to := from + bytes.IndexByte(b[from:], ';')
	// b (h.buf, or a new array when a long rule id outgrew it) is never
	// written again, so it can back strings; the remaining count is a
	// slice of the RateLimit value.
	rl := unsafe.String(unsafe.SliceData(b), len(b))
	l := d.Limits
	policy := l.Policy
	if d.Cal != nil {
		policy = CalendarPolicy(id, l, d.Cal)
	}
	h.vals = [4]string{l.QuotaStr, rl[from:to], policy, rl}
	// Each slice's capacity is 1, so a later Add to one header copies
	// instead of overwriting the next.
	hdr["X-Ratelimit-Limit"] = h.vals[0:1:1]
	hdr["X-Ratelimit-Remaining"] = h.vals[1:2:2]
	hdr["Ratelimit-Policy"] = h.vals[2:3:3]
	hdr["Ratelimit"] = h.vals[3:4:4]
}

// CalendarPolicy is the RateLimit-Policy of a calendar decision: the quota
// and the length of the current window in seconds (86400 on most days,
// 82800 or 90000 on a day with a DST change; a month's own length).
func CalendarPolicy(id string, l *engine.Limits, w *engine.Window) string {
	return `"` + id + `";q=` + l.QuotaStr + ";w=" + w.Secs
}

// CeilSeconds rounds a wait in ns up to whole seconds.
func CeilSeconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + 1e9 - 1) / 1e9
}
