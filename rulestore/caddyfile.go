package rulestore

import (
	"errors"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnmarshalFields reads a block of `field value...` lines into Fields and
// validates them as a rule of kind k. The dispenser must be at the token that
// opens the block. A bad field fails with the file and line of that field.
// Several values on one line are joined by a space (e.g. failure_statuses).
func UnmarshalFields(d *caddyfile.Dispenser, k Kind, id string) (Fields, error) {
	f, _, err := UnmarshalFieldsTokens(d, k, id)
	return f, err
}

// UnmarshalFieldsTokens is UnmarshalFields that also returns each field's
// token, so checks made later (a dangling reference) can name its line.
func UnmarshalFieldsTokens(d *caddyfile.Dispenser, k Kind, id string) (Fields, map[string]caddyfile.Token, error) {
	f := Fields{}
	lines := map[string]caddyfile.Token{}
	start := d.Token()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		tok := d.Token()
		if _, dup := f[name]; dup {
			return nil, nil, d.Errf("%s rule %q: field %s given twice", k, id, name)
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return nil, nil, d.Errf("%s rule %q: field %s needs a value", k, id, name)
		}
		f[name] = strings.Join(args, " ")
		lines[name] = tok
	}
	if _, err := Parse(k, id, f); err != nil {
		return nil, nil, ErrAtField(start, lines, err, "%s rule %q: %v", k, id, err)
	}
	return f, lines, nil
}

// ErrAtField is ErrAt at the line of the field err names (a *FieldError),
// else at tok.
func ErrAtField(tok caddyfile.Token, lines map[string]caddyfile.Token, err error, format string, args ...any) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		if t, ok := lines[fe.Field]; ok {
			tok = t
		}
	}
	return ErrAt(tok, format, args...)
}

// ErrAt is an error that names the file and line of tok, as Caddy's own
// Caddyfile errors do; for errors found after a block was read.
func ErrAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}
