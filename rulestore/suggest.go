package rulestore

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/sluicegw/sluice/rulestore/rawfields"
)

// Suggest returns the known name nearest to name, for a "did you mean"
// hint, or "" when none is close enough to be a likely typo
// (rawfields.Suggest).
func Suggest(name string, known ...string) string { return rawfields.Suggest(name, known...) }

// DidYouMean is ": did you mean <name>?" for the nearest known name, or "".
func DidYouMean(name string, known ...string) string { return rawfields.DidYouMean(name, known...) }

// UnknownField is the error for a misspelled sub-directive or field at the
// dispenser's line: "unknown field 'rout' in ratelimit: did you mean
// route?", or the list of known names when none is close.
func UnknownField(d *caddyfile.Dispenser, what, name string, known ...string) error {
	if hint := DidYouMean(name, known...); hint != "" {
		return d.Errf("unknown field '%s' in %s%s", name, what, hint)
	}
	return d.Errf("unknown field '%s' in %s (want %s)", name, what, strings.Join(known, ", "))
}

// FieldNames returns the fields of a kind, offered for a misspelled one
// (in the Caddyfile, JSON, Redis or the admin API): those given to
// RegisterKind, else its Spec's.
func FieldNames(k Kind) []string {
	info, ok := k.Info()
	if !ok {
		return nil
	}
	if len(info.FieldNames) > 0 {
		return info.FieldNames
	}
	return SpecFieldNames(k)
}

// suggestField adds "did you mean" to a parser's unknown-field error.
func suggestField(k Kind, err error) error {
	fe, ok := err.(*FieldError)
	if !ok || !strings.HasPrefix(fe.Reason, unknownFieldReason) {
		return err
	}
	hint := DidYouMean(fe.Field, FieldNames(k)...)
	if hint == "" {
		return err
	}
	c := *fe
	c.Reason = unknownFieldReason + hint
	return &c
}

const unknownFieldReason = "unknown field"
