package syntax

import (
	"net/textproto"
	"strconv"
	"strings"
)

// The value syntaxes every rule kind shares, so a boolean, a status or a
// header name is spelled the same in all three handlers' fields.

// ParseBool reads a boolean field: true/false, on/off, yes/no (any case),
// and the forms strconv.ParseBool knows (1/0, t/f).
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "yes":
		return true, nil
	case "off", "no":
		return false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, errBool
	}
	return b, nil
}

var errBool = constError("want true or false (or on/off, yes/no)")

// MinStatus and MaxStatus bound the status of a response Sluice writes
// itself (a refusal, an open breaker): a client or server error.
const (
	MinStatus = 400
	MaxStatus = 599
)

// ParseStatus reads the status of a response Sluice writes: 400-599.
func ParseStatus(v string) (int, error) {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s < MinStatus || s > MaxStatus {
		return 0, errStatus
	}
	return s, nil
}

var errStatus = constError("want an HTTP status 400-599")

// ValidHeaderName reports whether n is an HTTP header name (an RFC 9110
// token).
func ValidHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return textproto.CanonicalMIMEHeaderKey(n) != ""
}

type constError string

func (e constError) Error() string { return string(e) }
