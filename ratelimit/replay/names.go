package replay

// nameTable keeps the names of a shard's sampled keys in a small
// direct-mapped table, so a replay can name its top keys without the
// records holding strings: a key takes its slot (by hash) when it is
// recorded. Keys that share a slot vote for it (a majority vote: each
// record of the holder adds one, each of another key takes one, and the
// other key takes the slot at zero), so a frequent key keeps its name
// against the rare ones; a key without its name is shown by its hash.
// Guarded by the shard's lock.
type nameTable [nameSlots]nameSlot

const (
	nameSlots     = 512
	nameSlotBytes = 64
	nameMax       = 52 // longer names are cut, and shown with "…"
)

type nameSlot struct {
	hash uint64
	vote uint16
	n    uint8
	cut  bool
	b    [nameMax]byte
}

func (t *nameTable) note(h uint64, key []byte) {
	s := &t[(h>>8)&(nameSlots-1)]
	if s.hash == h {
		s.vote = min(s.vote+1, 1<<16-1)
		return
	}
	if s.vote > 0 {
		s.vote--
		return
	}
	s.hash, s.vote, s.cut = h, 1, len(key) > nameMax
	s.n = uint8(copy(s.b[:], key))
}

// name is slot s's key, "" when it holds none.
func (s *nameSlot) name() string {
	if s.hash == 0 && s.n == 0 {
		return ""
	}
	if s.cut {
		return string(s.b[:s.n]) + "…"
	}
	return string(s.b[:s.n])
}

// all is t's names by key hash (none for a nil t).
func (t *nameTable) all() map[uint64]string {
	names := make(map[uint64]string)
	if t == nil {
		return names
	}
	for i := range t {
		if name := t[i].name(); name != "" {
			names[t[i].hash] = name
		}
	}
	return names
}
