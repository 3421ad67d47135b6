package handlerkit

import "testing"

type counter struct {
	n         int
	destroyed *bool
}

func (c *counter) Destruct() error { *c.destroyed = true; return nil }

func TestSharedOutlivesAReload(t *testing.T) {
	pool := NewShared[*counter]()
	destroyed := false
	newC := func(string) *counter { return &counter{destroyed: &destroyed} }

	old := pool.Holder(newC)
	old.Get("r").n = 5
	// A reload provisions the new handler before cleaning up the old one.
	next := pool.Holder(newC)
	if got := next.Get("r").n; got != 5 {
		t.Fatalf("new generation sees n=%d, want the old state 5", got)
	}
	old.Release()
	if destroyed {
		t.Fatal("state destroyed while the new generation still holds it")
	}
	if next.Get("r") != next.Get("r") {
		t.Fatal("Get returns different values for one id")
	}
	next.Release()
	if !destroyed {
		t.Fatal("state not destroyed after the last holder released it")
	}
}
