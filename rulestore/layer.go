package rulestore

import "sync/atomic"

// Layer holds the rules of a Source (Redis or memory) by kind, then id. A
// published layer's maps are never mutated: a new rule id means a new map.
// Changing an existing rule only swaps the pointer in its slot, so an
// update costs O(1) however many rules are loaded.
type Layer []map[string]*Slot

// NewLayer is an empty layer with a place for every registered kind.
func NewLayer() *Layer {
	l := make(Layer, NumKinds())
	return &l
}

// Slot holds one rule of a layer; a change of the rule swaps it in place.
type Slot struct{ Rule atomic.Pointer[Rule] }

// NewSlot is a slot holding r.
func NewSlot(r *Rule) *Slot {
	s := new(Slot)
	s.Rule.Store(r)
	return s
}

// Of is the map of kind k's rules (nil if none).
func (l *Layer) Of(k Kind) map[string]*Slot { return ByKind(*l, k) }

// Get is the rule of kind k with this id, or nil.
func (l *Layer) Get(k Kind, id string) *Rule {
	if s := l.Of(k)[id]; s != nil {
		return s.Rule.Load()
	}
	return nil
}

// Copy is a deep copy with slots of its own, for a new source to start from.
func (l *Layer) Copy() *Layer {
	n := make(Layer, NumKinds())
	for k, m := range *l {
		n[k] = make(map[string]*Slot, len(m))
		for id, s := range m {
			n[k][id] = NewSlot(s.Rule.Load())
		}
	}
	return &n
}

// Shallow copies every kind's map, sharing the slots: a layer to add
// rules of any kind to.
func (l *Layer) Shallow() Layer {
	n := make(Layer, NumKinds())
	for _, k := range Kinds() {
		n[k] = make(map[string]*Slot, len(l.Of(k)))
		for id, sl := range l.Of(k) {
			n[k][id] = sl
		}
	}
	return n
}

// Clone copies the top level and the map of kind k, ready for a new or
// deleted id of kind k.
func (l *Layer) Clone(k Kind) *Layer {
	n := make(Layer, max(len(*l), NumKinds()))
	copy(n, *l)
	m := make(map[string]*Slot, len(l.Of(k))+1)
	for id, s := range l.Of(k) {
		m[id] = s
	}
	n[k] = m
	return &n
}

// RuleRef names one rule: its kind and id.
type RuleRef struct {
	Kind Kind
	ID   string
}
