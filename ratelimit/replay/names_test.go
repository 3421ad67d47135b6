package replay

import (
	"testing"
	"unsafe"
)

func TestNameSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(nameSlot{}); n != nameSlotBytes {
		t.Fatalf("a name slot is %d bytes, Bytes counts %d", n, nameSlotBytes)
	}
	if n := unsafe.Sizeof(Record{}); n != recordBytes {
		t.Fatalf("a record is %d bytes, Bytes counts %d", n, recordBytes)
	}
}

// A frequent key keeps its name against rare keys of the same slot.
func TestNamesKeepFrequentKeys(t *testing.T) {
	var tab nameTable
	heavy, light := uint64(7<<8), uint64(7<<8|1)
	for range 5 {
		tab.note(heavy, []byte("heavy"))
		tab.note(heavy, []byte("heavy"))
		tab.note(light, []byte("light"))
	}
	if s := &tab[7]; s.hash != heavy || s.name() != "heavy" {
		t.Fatalf("slot holds %q", s.name())
	}
	long := make([]byte, 80)
	for i := range long {
		long[i] = 'k'
	}
	var one nameTable
	one.note(3<<8, long)
	if got := one[3].name(); len(got) != nameMax+len("…") {
		t.Fatalf("a long name is kept as %q", got)
	}
}
