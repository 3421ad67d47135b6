package rulestore

import (
	"fmt"
)

// clip shortens untrusted text for a log line.
func clip(s string) string { return clipN(s, 64) }

// Clip shortens untrusted text (from a request or from Redis) to n bytes
// for a log line or an error message, saying how long it was.
func Clip(s string, n int) string { return clipN(s, n) }

func clipN(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%.*s… (%d bytes)", n, s, len(s))
	}
	return s
}
