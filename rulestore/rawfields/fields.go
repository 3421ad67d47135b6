package rawfields

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Fields are a rule's raw fields. They have the same names and syntax in the
// Caddyfile, in JSON and in the Redis hash, so a rule can be copied between
// the three unchanged.
type Fields map[string]string

// UnmarshalJSON accepts string, number and boolean values, so JSON configs
// can write "qps": 100 as naturally as "qps": "100".
func (f *Fields) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*f = nil // as encoding/json does for a map
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Fields, len(raw))
	for k, v := range raw {
		v = bytes.TrimSpace(v)
		var s string
		switch {
		case len(v) > 0 && v[0] == '"':
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("field %s: %v", k, err)
			}
		case bytes.Equal(v, []byte("true")), bytes.Equal(v, []byte("false")):
			s = string(v)
		default:
			if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				return fmt.Errorf("field %s: want a string, number or boolean, got %s", clip(k), clip(string(v)))
			}
			s = string(v)
		}
		out[k] = s
	}
	*f = out
	return nil
}

// Names returns the field names in sorted order, for stable messages.
func (f Fields) Names() []string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Digest hashes the fields in name order, each name and value ended by a
// NUL: equal fields, equal digest on every instance. Versions and inline
// rule ids are prefixes of it.
func (f Fields) Digest() [sha256.Size]byte {
	h := sha256.New()
	for _, name := range f.Names() {
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write([]byte(f[name]))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Equal reports whether two field sets are identical.
func (f Fields) Equal(g Fields) bool {
	if len(f) != len(g) {
		return false
	}
	for k, v := range f {
		if w, ok := g[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Errorf builds a FieldError for field with the value it had in fields.
func (f Fields) Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Value: f[field], Reason: fmt.Sprintf(format, args...)}
}
