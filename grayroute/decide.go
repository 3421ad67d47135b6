package grayroute

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// Matches reports whether the request carries the rule's tag with a
// matching value. A rule without a tag matches every request.
func (g *Rule) Matches(r *http.Request) bool { return g.matches(&request{Request: r}) }

func (g *Rule) matches(q *request) bool {
	if g.Tag == "" {
		return true
	}
	if !q.headersRead {
		q.readHeaders()
	}
	if (tagCheck{bit: g.tagBit, src: g.Source}).lacks(q) {
		return false // no such header, and no query or cookie to look in
	}
	return g.matchTag(q)
}

func (g *Rule) matchTag(q *request) bool {
	v, ok := tagValue(q, g.Source, g.Tag, g.tagHeader, g.tagBit)
	return ok && g.Value.Match(v)
}

// Threshold is the effective weight at now in basis points: the rule's
// weight, capped by its ramp if it has one. So a ramp raises the weight over
// time, and setting weight lower (even 0) holds or stops a ramp at once.
func (g *Rule) Threshold(now func() time.Time) uint32 {
	if g.State == StateRolledBack {
		return 0
	}
	t := g.Weight
	if g.Ramp != nil {
		if rt := g.Ramp.At(now()); rt < t {
			t = rt
		}
	}
	return t
}

// Canary decides whether a matching request goes to the target version.
// The choice is a stable hash of the rule id and the request's hash key;
// only when no key resolves is it random (random reports that).
func (g *Rule) Canary(r *http.Request, now func() time.Time) (canary, random bool) {
	s := g.split(r, g.Threshold(now), false)
	return s.canary, s.random
}

// splitOf is a request's split: its key hash and bucket when the
// threshold needed them (0 and 100 % resolve no key), or the random draw
// of a request without a key; drawn marks a draw made only for the
// record (weights_glue.go).
type splitOf struct {
	canary, random, drawn bool
	bucket                uint32
	key                   uint64
}

// split decides a request at threshold t (Canary); a recorded rule's
// split (draw) also draws a bucket at 0 and 100 %, for its record.
func (g *Rule) split(r *http.Request, t uint32, draw bool) splitOf {
	if t == 0 || t >= Buckets {
		s := splitOf{canary: t != 0}
		if draw {
			s.bucket, s.drawn = rand.Uint32N(Buckets), true
		}
		return s
	}
	var buf [128]byte
	key, ok := g.HashKey.Append(buf[:0], r)
	if !ok {
		b := rand.Uint32N(Buckets)
		return splitOf{canary: b < t, random: true, bucket: b}
	}
	m := mix64(keyState(g.idHash, key))
	b := uint32(m % Buckets)
	return splitOf{canary: InCanary(b, t), bucket: b, key: m | 1}
}
