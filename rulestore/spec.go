package rulestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicegw/sluice/rulestore/syntax"
)

// A Spec is the typed, documented form of one kind's rule fields (what the
// JSON config and `caddy adapt` show). It converts losslessly to and from
// the Fields the store works with, which keep the Redis field names and
// syntax: a Spec field's json name is its Redis field name.
//
// Field types: string (any value), *float64 and *int64 (numbers), *bool,
// *Duration, []string (a list, comma-separated in Redis) and http.Header
// ("Name: value; Name: value" in Redis). Pointers tell a field set to zero
// (weight 0, headers false) from one not given. A struct tag
// `sluice:"percent"` lets a number carry a trailing %, `sluice:"seconds"`
// lets a bare number of a duration mean seconds, as the Redis parser does.
type Spec interface {
	Kind() Kind
}

// NewSpec returns an empty Spec of kind k.
func NewSpec(k Kind) (Spec, error) {
	info, ok := k.Info()
	if !ok {
		return nil, fmt.Errorf("unknown rule kind %d", k)
	}
	return info.NewSpec(), nil
}

// SpecFromFields converts Redis-syntax fields into kind k's Spec. An
// unknown field or a value of the wrong type is a *FieldError.
func SpecFromFields(k Kind, f Fields) (Spec, error) {
	s, err := NewSpec(k)
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(s).Elem()
	idx := specIndex(v.Type())
	for _, name := range f.Names() {
		i, ok := idx[name]
		if !ok {
			return nil, suggestField(k, f.Errorf(name, "unknown field (want one of %s)", strings.Join(specNames(v.Type()), ", ")))
		}
		if err := setField(v.Field(i), v.Type().Field(i), f[name]); err != nil {
			return nil, f.Errorf(name, "%v", err)
		}
	}
	return s, nil
}

// SpecFields converts a Spec into Redis-syntax fields; a nil Spec has none.
func SpecFields(s Spec) Fields {
	v := reflect.ValueOf(s)
	if !v.IsValid() || v.IsNil() {
		return nil
	}
	v = v.Elem()
	f := Fields{}
	for i := 0; i < v.NumField(); i++ {
		name := jsonName(v.Type().Field(i))
		if name == "" {
			continue
		}
		if s, ok := fieldString(v.Field(i)); ok {
			f[name] = s
		}
	}
	return f
}

// decodeSpec reads a Spec from JSON. A value may be given typed ("qps": 5)
// or as a string in the Redis syntax ("qps": "5"); unknown fields and
// wrong types are errors naming the field.
func decodeSpec(s Spec, b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	v := reflect.ValueOf(s).Elem()
	idx := specIndex(v.Type())
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		val := bytes.TrimSpace(raw[name])
		i, ok := idx[name]
		if !ok {
			fe := &FieldError{Field: name, Reason: "unknown field (want one of " + strings.Join(specNames(v.Type()), ", ") + ")"}
			return suggestField(s.Kind(), fe)
		}
		fv, sf := v.Field(i), v.Type().Field(i)
		if len(val) > 0 && val[0] == '"' && fv.Kind() != reflect.String {
			var str string
			if err := json.Unmarshal(val, &str); err != nil {
				return &FieldError{Field: name, Reason: err.Error()}
			}
			if err := setField(fv, sf, str); err != nil {
				return &FieldError{Field: name, Value: str, Reason: err.Error()}
			}
			continue
		}
		if _, dur := fv.Interface().(*syntax.Duration); dur && !bytes.Equal(val, []byte("null")) {
			// A bare number means what it means in Redis (seconds where
			// the field says so, else an error), never nanoseconds.
			if err := setField(fv, sf, string(val)); err != nil {
				return &FieldError{Field: name, Value: string(val), Reason: err.Error()}
			}
			continue
		}
		if fv.Kind() == reflect.String && len(val) > 0 && val[0] != '"' && !bytes.Equal(val, []byte("null")) {
			// A number or boolean for a free-form field: keep its text.
			if bytes.ContainsAny(val[:1], "{[") {
				return &FieldError{Field: name, Reason: "want a string, got " + clip(string(val))}
			}
			fv.SetString(string(val))
			continue
		}
		if err := json.Unmarshal(val, fv.Addr().Interface()); err != nil {
			return &FieldError{Field: name, Value: string(val), Reason: "want " + typeWord(sf)}
		}
	}
	return nil
}

func typeWord(sf reflect.StructField) string {
	switch sf.Type {
	case reflect.TypeFor[*float64]():
		return "a number"
	case reflect.TypeFor[*int64]():
		return "a whole number"
	case reflect.TypeFor[*bool]():
		return "true or false"
	case reflect.TypeFor[*syntax.Duration]():
		return "a duration with a unit, e.g. \"10s\""
	case reflect.TypeFor[[]string]():
		return "a list of strings"
	case reflect.TypeFor[http.Header]():
		return `an object of header name to list of values, e.g. {"Retry-After": ["5"]}`
	}
	return "a string"
}

// setField sets fv from its Redis-syntax string.
func setField(fv reflect.Value, sf reflect.StructField, s string) error {
	t := strings.TrimSpace(s)
	switch fv.Interface().(type) {
	case string:
		fv.SetString(s)
	case *float64:
		if sf.Tag.Get("sluice") == "percent" {
			t = strings.TrimSuffix(t, "%")
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil {
			return errors.New("want a number")
		}
		fv.Set(reflect.ValueOf(&x))
	case *int64:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return errors.New("want a whole number")
		}
		fv.Set(reflect.ValueOf(&n))
	case *bool:
		b, err := syntax.ParseBool(t)
		if err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(&b))
	case *syntax.Duration:
		var d time.Duration
		if x, err := strconv.ParseFloat(t, 64); err == nil && sf.Tag.Get("sluice") == "seconds" {
			d = time.Duration(x * float64(time.Second))
		} else if t != "0" {
			if d, err = syntax.ParseDuration(t); err != nil {
				return err
			}
		}
		dd := syntax.Duration(d)
		fv.Set(reflect.ValueOf(&dd))
	case []string:
		list := strings.FieldsFunc(t, func(r rune) bool { return r == ',' || r == ' ' })
		fv.Set(reflect.ValueOf(list))
	case http.Header:
		h := http.Header{}
		if err := ParseHeaderList(h, t); err != nil {
			return err
		}
		fv.Set(reflect.ValueOf(h))
	default:
		return fmt.Errorf("field type %s not supported", sf.Type)
	}
	return nil
}

// fieldString writes fv in the Redis syntax; ok is false when it is unset.
func fieldString(fv reflect.Value) (string, bool) {
	switch x := fv.Interface().(type) {
	case string:
		return x, x != ""
	case *float64:
		if x == nil {
			return "", false
		}
		return strconv.FormatFloat(*x, 'f', -1, 64), true
	case *int64:
		if x == nil {
			return "", false
		}
		return strconv.FormatInt(*x, 10), true
	case *bool:
		if x == nil {
			return "", false
		}
		return strconv.FormatBool(*x), true
	case *syntax.Duration:
		if x == nil {
			return "", false
		}
		return syntax.DocDuration(time.Duration(*x)), true
	case []string:
		return strings.Join(x, ","), len(x) > 0
	case http.Header:
		return FormatHeaderList(x), len(x) > 0
	}
	return "", false
}

func jsonName(sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// specIndex maps a Spec type's field names to struct field indexes.
func specIndex(t reflect.Type) map[string]int {
	idx := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if name := jsonName(t.Field(i)); name != "" {
			idx[name] = i
		}
	}
	return idx
}

// specNames are a Spec type's field names in declaration order, without
// the inline rule's id.
func specNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if name := jsonName(t.Field(i)); name != "" && name != "id" {
			names = append(names, name)
		}
	}
	return names
}

// SpecFieldNames are the field names of kind k's Spec, without the inline
// rule's id.
func SpecFieldNames(k Kind) []string {
	s, err := NewSpec(k)
	if err != nil {
		return nil
	}
	return specNames(reflect.TypeOf(s).Elem())
}

// ParseHeaderList reads "Name: value; Name: value" into h. A segment that
// does not start with "Name:" continues the previous value, so
// "Content-Type: text/plain; charset=utf-8" stays one header.
func ParseHeaderList(h http.Header, v string) error {
	var name, val string
	flush := func() {
		if name != "" {
			h.Add(name, strings.TrimSpace(val))
		}
	}
	for seg := range strings.SplitSeq(v, ";") {
		n, rest, ok := strings.Cut(seg, ":")
		if ok && syntax.ValidHeaderName(strings.TrimSpace(n)) {
			flush()
			name, val = strings.TrimSpace(n), rest
			continue
		}
		if name == "" {
			if strings.TrimSpace(seg) == "" {
				continue
			}
			return errHeaderList
		}
		val += ";" + seg
	}
	flush()
	return nil
}

var errHeaderList = constError(`want "Name: value; Name: value"`)

type constError string

func (e constError) Error() string { return string(e) }

// FormatHeaderList writes h as ParseHeaderList reads it, names sorted.
func FormatHeaderList(h http.Header) string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		for _, v := range h[n] {
			parts = append(parts, n+": "+v)
		}
	}
	return strings.Join(parts, "; ")
}
