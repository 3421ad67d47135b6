package redissource

import (
	"context"
	"github.com/sluicegw/sluice/rulestore"
	"sync"
	"time"

	"github.com/sluicegw/sluice/rulestore/snapshot"
	"go.uber.org/zap"
)

// How a Redis source uses its local snapshot (package rulestore/snapshot).
//
// Written: by a goroutine of its own, at most every diskSaveEvery, once
// the first load is done and whenever the rules held (or the epoch) have
// changed since the last write: never on the request path.
//
// Read: once, at the source's first load, after the epoch check.
//   - The epoch marker in Redis differs from the snapshot's: Redis lost
//     its data since the snapshot was written. Every rule of the snapshot
//     is put in force and retained, as a running instance retains what it
//     holds when it sees the loss (checkEpoch).
//   - It is the same: Redis is the truth. Only the rules the snapshot
//     marks retained (held since an earlier loss, so in no Redis hash)
//     are put in force, retained again.
//
// Either way the snapshot's rules stay at hand for that first load: a
// rule whose hash is rejected, with no version held here and no readable
// last good version in Redis, is served from it (recoverLastGood).
//
// Redis unreachable when the source starts: until its first load, the
// snapshot's rules are served as they are (serveDiskUntilLoaded), so a
// restart during a Redis outage does not open what the fleet limits. The
// first load then decides as above, the provisional rules counting as
// not held.

// diskSaveEvery bounds how often the snapshot is rewritten during a bulk
// change.
const diskSaveEvery = 250 * time.Millisecond

// diskState is the snapshot's bookkeeping, owned by the run goroutine
// except where said.
type diskState struct {
	path string // "" = no snapshot (no data directory)
	read bool   // the file was read (first load)
	// provisional: the snapshot's rules served while Redis was
	// unreachable before the first load (non-nil once tried).
	provisional map[rulestore.RuleRef]bool
	rules       map[rulestore.RuleRef]rulestore.Fields // the file's rules, until the first load is done
	// What the last handed-off write held.
	savedChanges uint64
	savedEpoch   string
	savedAt      time.Time
	// garbled: last-good records found unreadable, by value, so each is
	// counted and logged once, not on every resync.
	garbled map[rulestore.RuleRef]string

	mu      sync.Mutex // guards pending, between run and the writer
	pending *snapshot.File
	kick    chan struct{}
}

// seedFromDisk reads the snapshot on the first load (see above).
func (s *redisSource) seedFromDisk() {
	d := &s.disk
	if d.read || d.path == "" {
		return
	}
	d.read = true
	snap, err := snapshot.Read(d.path)
	if err != nil {
		s.logger.Error("local rule snapshot unreadable: not using it", zap.String("path", d.path), zap.Error(err))
		return
	}
	if snap == nil {
		return
	}
	lost := snap.Epoch != s.epoch
	provisional := d.provisional
	d.provisional = nil
	next := s.snap.Load().Shallow()
	d.rules = map[rulestore.RuleRef]rulestore.Fields{}
	put := 0
	for name, rules := range snap.Rules {
		k, ok := rulestore.ParseKind(name)
		if !ok {
			continue
		}
		for id, dr := range rules {
			if rulestore.ValidID(id) != nil || len(dr.Fields) == 0 {
				continue
			}
			ref := rulestore.RuleRef{Kind: k, ID: id}
			d.rules[ref] = dr.Fields
			if (next[k][id] != nil && !provisional[ref]) || !(lost || dr.Retained) {
				continue
			}
			r, err := s.diskRule(ref, dr.Fields)
			if err != nil {
				s.logger.Warn("a rule of the local snapshot does not validate here; not serving it",
					zap.String("key", s.names.RuleKey(k, id)), zap.String("error", rulestore.Clip(err.Error(), 512)))
				continue
			}
			next[k][id] = rulestore.NewSlot(r)
			s.retained[ref] = true
			put++
		}
	}
	if put == 0 {
		return
	}
	s.snap.Store(&next)
	s.changes.Add(1)
	if lost {
		s.logger.Error("redis lost its data since the local rule snapshot was written (epoch marker differs): "+
			"serving the rules it held; rewrite them to Redis to make them durable again, or DEL+PUBLISH to delete one",
			zap.String("path", d.path), zap.Int("retained", put), zap.Time("snapshot_at", snap.At))
	} else {
		s.logger.Info("serving the rules retained since redis lost its data from the local rule snapshot",
			zap.String("path", d.path), zap.Int("retained", put))
	}
}

// serveDiskUntilLoaded puts the snapshot's rules in force while Redis has
// not been loaded once (unreachable at start), each where this instance
// holds no rule of the id: what the fleet enforced before the restart
// goes on being enforced until Redis answers. Run goroutine only.
func (s *redisSource) serveDiskUntilLoaded() {
	d := &s.disk
	if s.loaded || d.read || d.path == "" || d.provisional != nil {
		return
	}
	snap, err := snapshot.Read(d.path)
	if err != nil {
		s.logger.Error("local rule snapshot unreadable: not using it", zap.String("path", d.path), zap.Error(err))
	}
	d.provisional = map[rulestore.RuleRef]bool{}
	if snap == nil {
		return
	}
	next := s.snap.Load().Shallow()
	for name, rules := range snap.Rules {
		k, ok := rulestore.ParseKind(name)
		if !ok {
			continue
		}
		for id, dr := range rules {
			if rulestore.ValidID(id) != nil || len(dr.Fields) == 0 || next[k][id] != nil {
				continue
			}
			ref := rulestore.RuleRef{Kind: k, ID: id}
			r, err := s.diskRule(ref, dr.Fields)
			if err != nil {
				continue // seedFromDisk names it once Redis answers
			}
			next[k][id] = rulestore.NewSlot(r)
			d.provisional[ref] = true
		}
	}
	if len(d.provisional) == 0 {
		return
	}
	s.snap.Store(&next)
	s.changes.Add(1)
	s.logger.Warn("redis unreachable at start: serving the rules of the local rule snapshot until it answers",
		zap.String("path", d.path), zap.Int("rules", len(d.provisional)), zap.Time("snapshot_at", snap.At))
}

// diskRule validates a rule of the snapshot as a rule from Redis.
func (s *redisSource) diskRule(ref rulestore.RuleRef, f rulestore.Fields) (*rulestore.Rule, error) {
	if err := rulestore.CheckSize(f); err != nil {
		return nil, err
	}
	st := s.staticRule(ref.Kind, ref.ID)
	v, _, err := rulestore.ParseOver(ref.Kind, ref.ID, st, f)
	if err != nil {
		return nil, err
	}
	return &rulestore.Rule{Kind: ref.Kind, ID: ref.ID, Fields: f, Value: v, Source: "redis", Overlay: f, Partial: st != nil}, nil
}

// saveDisk hands the rules held to the writer when they changed since the
// last write. Run goroutine only (it reads retained).
func (s *redisSource) saveDisk(now time.Time) {
	d := &s.disk
	if d.path == "" || !s.loaded {
		return
	}
	changes := s.changes.Load()
	if (changes == d.savedChanges && s.epoch == d.savedEpoch) || now.Sub(d.savedAt) < diskSaveEvery {
		return
	}
	d.savedChanges, d.savedEpoch, d.savedAt = changes, s.epoch, now
	snap := &snapshot.File{Format: snapshot.Format, Redis: s.probeAddrs, Prefix: s.names.prefix,
		At: now.UTC(), Epoch: s.epoch, Rules: map[string]map[string]snapshot.Rule{}}
	l := s.snap.Load()
	for _, k := range rulestore.Kinds() {
		m := l.Of(k)
		if len(m) == 0 {
			continue
		}
		rules := make(map[string]snapshot.Rule, len(m))
		for id, sl := range m {
			r := sl.Rule.Load()
			f := r.Overlay
			if f == nil {
				f = r.Fields
			}
			rules[id] = snapshot.Rule{Fields: f, Retained: s.retained[rulestore.RuleRef{Kind: k, ID: id}]}
		}
		snap.Rules[k.String()] = rules
	}
	d.mu.Lock()
	d.pending = snap
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default: // a write is due: it takes the newest
	}
}

// writeDisk writes the snapshots handed to it until ctx ends.
func (s *redisSource) writeDisk(ctx context.Context) {
	d := &s.disk
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		}
		d.mu.Lock()
		snap := d.pending
		d.pending = nil
		d.mu.Unlock()
		if snap == nil {
			continue
		}
		err := snapshot.Write(d.path, snap)
		switch {
		case err != nil && !failing:
			s.logger.Warn("cannot write the local rule snapshot: an instance restarted while redis has lost its data will not have these rules",
				zap.String("path", d.path), zap.Error(err))
		case err == nil && failing:
			s.logger.Info("local rule snapshot written again", zap.String("path", d.path))
		}
		failing = err != nil
	}
}
