package engine

import (
	"testing"
)

// peek, which GET /sluice/quota reads a local key through, leaves the
// table as it was: an unknown key gets no entry, a known key keeps its
// place in the LRU (the least recently used key stays the one evicted
// next), and the copy it returns is the state a request left.
func TestPeekLeavesTheTableAlone(t *testing.T) {
	r := bucket(1, 5, 64)
	e := NewLocal(r)
	now := int64(1e9)
	for _, k := range []string{"a", "b", "c"} {
		e.Take(r, []byte(k), now)
	}
	e.Take(r, []byte("a"), now) // a: two tokens spent
	s := e.tab.Shard([]byte("b"))
	tail := string(s.keyOf(s.at(s.tail)))
	if tail != "b" {
		t.Fatalf("least recently used %q, want b", tail)
	}

	ent, ok := e.Peek([]byte("b"))
	if !ok || ent.ent.tb.tokens != 4 {
		t.Fatalf("peek b: ok=%v tokens %v, want 4", ok, ent.ent.tb.tokens)
	}
	if ent, ok := e.Peek([]byte("a")); !ok || ent.ent.tb.tokens != 3 {
		t.Fatalf("peek a: ok=%v tokens %v, want 3", ok, ent.ent.tb.tokens)
	}
	if _, ok := e.Peek([]byte("nobody")); ok {
		t.Fatal("peek found a key never taken")
	}
	if got := string(s.keyOf(s.at(s.tail))); got != tail {
		t.Fatalf("after peeks the least recently used is %q, was %q", got, tail)
	}
	if e.Keys() != 3 {
		t.Fatalf("keys %d after peeks, want 3", e.Keys())
	}
}
