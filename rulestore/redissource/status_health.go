package redissource

import (
	"github.com/sluicegw/sluice/rulestore"
	"sort"
	"sync"
	"time"
)

// What the status page needs to show every rule's health beyond the
// rejected and missing ids: the keys a resync skipped because their id is
// not valid, and whether a rejected rule is being rejected again at the
// same version (a resync re-reads it; that is not a new rejection).

// maxSkippedShown bounds the skipped keys kept (ids come from anyone who can
// write to Redis).
const maxSkippedShown = 100

// skippedKeys are the rule keys with an invalid id seen by the last resync.
type skippedKeys struct {
	mu   sync.Mutex
	next []rulestore.InvalidRule // being collected by the running resync
	last []rulestore.InvalidRule // of the last complete resync
}

// skip notes a key of kind k whose id the store ignores.
func (s *skippedKeys) skip(k rulestore.Kind, id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.next) < maxSkippedShown {
		s.next = append(s.next, rulestore.InvalidRule{Kind: k.String(), ID: clip(id), Problem: "skipped",
			Reason: "ignored: " + err.Error(), Since: time.Now().UTC()})
	}
}

// begin starts collecting a resync's skipped keys; end publishes them.
func (s *skippedKeys) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = nil
}

func (s *skippedKeys) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	since := map[string]time.Time{}
	for _, r := range s.last {
		since[r.Kind+"/"+r.ID] = r.Since
	}
	for i, r := range s.next {
		if t, ok := since[r.Kind+"/"+r.ID]; ok {
			s.next[i].Since = t
		}
	}
	s.last, s.next = s.next, nil
}

func (s *skippedKeys) list() []rulestore.InvalidRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rulestore.InvalidRule(nil), s.last...)
}

// rejectedBefore reports whether the rule is already listed as rejected at
// the version of f (nil: a key that is not a hash): seeing it again is no
// new rejection.
func (fb *feedback) rejectedBefore(k rulestore.Kind, id string, f rulestore.Fields) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	prev, ok := fb.invalid[rulestore.RuleRef{Kind: k, ID: id}]
	if !ok {
		return false
	}
	if f == nil { // a key that is not a hash has no version
		return prev.Version == ""
	}
	return prev.Version == rulestore.Version(f)
}

// storedFields are a rejected rule's raw fields as the status page shows
// them: each name and value clipped, at most 64 fields.
func storedFields(f rulestore.Fields) rulestore.Fields {
	if f == nil {
		return nil
	}
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	out := rulestore.Fields{}
	for _, k := range names[:min(len(names), 64)] {
		out[clip(k)] = rulestore.Clip(f[k], 256)
	}
	return out
}
