package overload

import (
	"strconv"
	"strings"
)

// Class is a request's priority class, 0 most important. Under overload
// the queue serves a class before every less important one, and the
// least important waiters are refused first when it is full.
type Class uint8

const (
	Critical Class = iota
	High
	Normal
	Low
	Sheddable
	// Classes is the number of classes.
	Classes = 5
)

var classNames = [Classes]string{"critical", "high", "normal", "low", "sheddable"}

func (c Class) String() string {
	if c < Classes {
		return classNames[c]
	}
	return "normal"
}

// ParseClass reads a class name or its number 0–4 (case and surrounding
// space ignored). Anything else, the empty value included, is Normal and
// ok is false: a client's odd header never refuses its request.
func ParseClass(s string) (c Class, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) == 1 && s[0] >= '0' && s[0] <= '4' {
		return Class(s[0] - '0'), true
	}
	for i, n := range classNames {
		if strings.EqualFold(s, n) {
			return Class(i), true
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < Classes {
		return Class(n), true
	}
	return Normal, false
}
