package handlerkit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaskKey hides a key's value for logs, events and state endpoints, keeping
// its prefix: "user:alice" becomes "user:sha256:<12 hex>", a value with no
// short prefix just "sha256:<12 hex>". The same key always gives the same
// mask, so an operator can still follow one key; rules opt out with
// raw_keys.
func MaskKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := "sha256:" + hex.EncodeToString(sum[:6])
	if p, _, ok := strings.Cut(key, ":"); ok && len(p) <= 16 && p != "" {
		return p + ":" + h
	}
	return h
}
