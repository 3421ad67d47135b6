package rulestore

import "github.com/sluicegw/sluice/rulestore/rawfields"

// clip shortens untrusted text for a log line.
func clip(s string) string { return rawfields.Clip(s, 64) }

// Clip shortens untrusted text (from a request or from Redis) to n bytes
// for a log line or an error message, saying how long it was.
func Clip(s string, n int) string { return rawfields.Clip(s, n) }
