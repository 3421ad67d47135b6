package ratelimit

import (
	"testing"
	"unsafe"
)

// The provider that holds a decision's placeholders is one allocation of
// 144 bytes only while they take at most 120 (see placeholders).
func TestPlaceholdersSize(t *testing.T) {
	if n := unsafe.Sizeof(placeholders{}); n > 120 {
		t.Fatalf("placeholders take %d bytes, want at most 120", n)
	}
}
