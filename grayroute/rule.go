package grayroute

import (
	"fmt"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/sluicegw/sluice/internal/handlerkit"
	"github.com/sluicegw/sluice/rulestore"
)

func init() { handlerkit.RegisterRules(rulestore.Gray, fields, ParseRule) }

// DefaultHashKey buckets by the X-User-Id header, else the client IP.
const DefaultHashKey = "userId"

// Rule is a validated gray rule: the typed form of a gray:rule:<id> hash.
type Rule struct {
	ID string
	// Tag is the header, query parameter or cookie to match; "" matches every
	// request (a weight-only canary).
	Tag       string
	tagHeader string // canonical header form of Tag
	tagBit    uint64 // headerBit(tagHeader)
	idHash    uint64 // idHash(ID), the bucket hash's start
	Source    Source
	Value     ValueMatcher
	// Target is the canary version; Fallback the version for matching traffic
	// outside the weight ("" = the handler's default_version).
	Target, Fallback string
	// Weight in basis points (0..Buckets).
	Weight         uint32
	HashKey        handlerkit.Key
	Ramp           *Ramp
	FallbackOnOpen string // circuit breaker rule id, or ""
	// Analysis settings (analysis_rule.go); nil when analysis is off.
	Analysis   *RuleAnalysis
	State      CanaryState
	analysisOn bool

	// The decisions of a request this rule matched: to the target, and
	// to the fallback (nil without one: then the handler's default
	// version, the last one asked for kept in toDefault).
	toTarget, toFallback *decision
	toDefault            atomic.Pointer[decision]
	// counters caches this rule's metric series; a changed rule is a new *Rule.
	counters atomic.Pointer[ruleCounters]
	// splits is the record of its id's split (weights_glue.go), set on
	// its first request.
	splits atomic.Pointer[splitRecorder]
}

// ParseRule validates a gray rule's fields. Errors name the field.
func ParseRule(id string, f rulestore.Fields) (*Rule, error) {
	g := &Rule{ID: id, Weight: Buckets}
	p := &ruleParse{FieldReader: handlerkit.FieldReader{Fields: f}, g: g}
	if err := fields.ReadEach(p, &p.FieldReader, func(name string) error {
		return f.Errorf(name, "unknown field (want one of %s)", strings.Join(ruleFieldNames, ", "))
	}); err != nil {
		return nil, err
	}
	if g.Target == "" {
		return nil, f.Errorf("target_version", "required")
	}
	if g.Tag == "" && f["match_value"] != "" && f["match_value"] != "*" {
		return nil, f.Errorf("match_value", "needs a match_tag")
	}
	if err := g.finishAnalysis(f); err != nil {
		return nil, err
	}
	if g.HashKey.IsZero() {
		g.HashKey, _ = handlerkit.ParseKey(DefaultHashKey)
	}
	g.tagHeader = textproto.CanonicalMIMEHeaderKey(g.Tag)
	g.tagBit, g.idHash = headerBit(g.tagHeader), idHash(g.ID)
	g.toTarget = newDecision(g.Target, g.ID)
	if g.Fallback != "" {
		g.toFallback = newDecision(g.Fallback, g.ID)
	}
	return g, nil
}

// fallbackTo is the decision to the handler's default version, for a rule
// without a fallback: built once per default (handlers sharing the rule
// usually share their default too).
func (g *Rule) fallbackTo(version string) *decision {
	if d := g.toDefault.Load(); d != nil && d.version == version {
		return d
	}
	d := newDecision(version, g.ID)
	g.toDefault.Store(d)
	return d
}

// MaxVersionLength bounds a version name.
const MaxVersionLength = 64

// ValidVersion accepts letters, digits and . _ - up to 64 bytes, so a version
// is safe in a header, a variable, a log line and a metric label.
func ValidVersion(v string) error {
	if v == "" {
		return fmt.Errorf("empty version")
	}
	if len(v) > MaxVersionLength {
		return fmt.Errorf("version longer than %d bytes", MaxVersionLength)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("character %q not allowed in a version (use letters, digits, . _ -)", c)
		}
	}
	return nil
}
