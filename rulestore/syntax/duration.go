package syntax

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// ParseDuration reads a duration field: a number with a unit (500ms, 10s,
// 5m, 1h, 1d). A bare number is an error, because whether it meant
// milliseconds or seconds cannot be told; "0" is accepted.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return 0, errors.New("needs a unit, e.g. " + v + "s or " + v + "ms")
	}
	d, err := caddy.ParseDuration(v)
	if err != nil {
		return 0, errors.New("want a duration with a unit, e.g. 500ms, 10s or 5m")
	}
	return d, nil
}

// Duration is a caddy.Duration that JSON shows as a Go duration string
// ("10s", "1m30s"); it reads a string with a unit or integer nanoseconds,
// as caddy.Duration does.
type Duration caddy.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(DocDuration(time.Duration(d)))
}

// UnmarshalJSON reads what caddy.Duration reads.
func (d *Duration) UnmarshalJSON(b []byte) error {
	return (*caddy.Duration)(d).UnmarshalJSON(b)
}
