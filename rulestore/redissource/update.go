package redissource

import (
	"context"
	"errors"
	"github.com/sluicegw/sluice/rulestore"

	"go.uber.org/zap"
)

// Applying one rule read from Redis to the held layer: a re-read after a
// publish (refresh.go) or a resync (resync.go).

func (s *redisSource) upsert(k rulestore.Kind, id string, f rulestore.Fields) {
	old := s.current().Get(k, id)
	delete(s.retained, rulestore.RuleRef{Kind: k, ID: id})
	if old != nil && old.Fields.Equal(f) {
		s.feedback.reaccepted(k, id, f)
		return
	}
	r, ok := s.parse(k, id, f, old)
	if !ok {
		if old == nil && !s.feedback.isUnused(k, id) {
			s.noGood = append(s.noGood, rulestore.RuleRef{Kind: k, ID: id})
		}
		return
	}
	s.install(k, id, r, old)
	s.logger.Info("rule updated", zap.String("key", s.names.RuleKey(k, id)))
	s.applied(k, id, old, f)
}

// install puts r in force in place of old (nil: a new id) when the batch
// is published: a batch is in force at once, so a binding updated to name
// a rule created in the same batch never names it before it is in force
// (stored in its slot at once, it did, across the batch's round trips).
func (s *redisSource) install(k rulestore.Kind, id string, r, old *rulestore.Rule) {
	if old != nil {
		s.updated = append(s.updated, slotUpdate{k, id, r})
	} else {
		s.edit(k).Of(k)[id] = rulestore.NewSlot(r)
	}
	s.status.updates.Add(1)
}

// slotUpdate is a rule in force updated by the batch, not yet published.
type slotUpdate struct {
	k  rulestore.Kind
	id string
	r  *rulestore.Rule
}

// A batch of re-read rules (refresh.go) edits one copy of the layer's maps
// and publishes it once: copying a kind's map for each new or deleted id
// would cost O(rules held) per id, so a bulk change of n rules O(n²).

// current is the layer as the batch left it so far.
func (s *redisSource) current() *rulestore.Layer {
	if s.editing != nil {
		return s.editing
	}
	return s.snap.Load()
}

// edit returns the batch's layer with its map of kind k copied, once per
// batch, ready for new and deleted ids.
func (s *redisSource) edit(k rulestore.Kind) *rulestore.Layer {
	if s.editing == nil {
		s.editing, s.edited = s.snap.Load(), make([]bool, rulestore.NumKinds())
	}
	if !rulestore.ByKind(s.edited, k) {
		s.editing = s.editing.Clone(k)
		s.edited[k] = true
	}
	return s.editing
}

// publishEdit puts the batch's updated, new and deleted ids in force at
// once. An update alone is stored in its slot (a Handle sees it without
// looking the id up again); with others, or with new or deleted ids, each
// updated id gets a new slot in the batch's copy of the layer, and the
// copy is published in one store.
func (s *redisSource) publishEdit() {
	if len(s.updated) == 1 && s.editing == nil {
		u := s.updated[0]
		s.snap.Load().Of(u.k)[u.id].Rule.Store(u.r)
		s.changes.Add(1)
	} else {
		for _, u := range s.updated {
			s.edit(u.k).Of(u.k)[u.id] = rulestore.NewSlot(u.r)
		}
	}
	clear(s.updated)
	s.updated = s.updated[:0]
	if s.editing != nil {
		s.snap.Store(s.editing)
		s.editing = nil
		s.changes.Add(1)
	}
}

// installLastGood puts in force the fleet's last good versions read for
// rules rejected here with no version of their own (see lastgood.go).
func (s *redisSource) installLastGood(ctx context.Context) {
	refs := s.noGood
	s.noGood = nil
	for ref, r := range s.recoverLastGood(ctx, refs) {
		s.install(ref.Kind, ref.ID, r, s.current().Get(ref.Kind, ref.ID))
	}
	s.publishEdit()
}

func (s *redisSource) remove(k rulestore.Kind, id string) {
	delete(s.retained, rulestore.RuleRef{Kind: k, ID: id})
	old := s.current().Get(k, id)
	if old == nil {
		if !s.feedback.unusedGone(k, id) {
			s.feedback.forget(k, id, rulestore.StoredVersion(s.staticRule(k, id), nil))
		}
		return
	}
	delete(s.edit(k).Of(k), id)
	s.status.updates.Add(1)
	s.logger.Info("rule deleted", zap.String("key", s.names.RuleKey(k, id)))
	s.applied(k, id, old, nil)
}

// parse validates a rule read from Redis. A bad rule is logged with its key,
// field and reason, and the last good version (old) stays in force.
func (s *redisSource) parse(k rulestore.Kind, id string, f rulestore.Fields, old *rulestore.Rule) (*rulestore.Rule, bool) {
	st := s.staticRule(k, id)
	var v any
	err := rulestore.CheckSize(f)
	if err == nil {
		v, _, err = rulestore.ParseOver(k, id, st, f)
	}
	if err != nil && st == nil && old == nil && rulestore.IncompleteHere(f, err) && !s.usedHere(k, id) &&
		(s.declaredElsewhere(k, id, f) || s.declaredLive(k, id)) {
		s.unusedHere(k, id, f, err) // declared elsewhere only (unused.go)
		return nil, false
	}
	again := err != nil && s.feedback.rejectedBefore(k, id, f)
	s.feedback.verdict(k, id, f, err)
	if err == nil {
		rulestore.WarnRenamed(s.logger, k, id, f) // once per version: unchanged fields are not parsed again
		s.feedback.queueLastGood(lastGoodOp{ref: rulestore.RuleRef{Kind: k, ID: id}, mode: "set", fields: f})
	} else if old != nil {
		s.feedback.queueLastGood(lastGoodOp{ref: rulestore.RuleRef{Kind: k, ID: id}, mode: "keep", fields: old.Fields})
	}
	if err != nil {
		if !again { // a resync re-reading the same bad version is no new rejection
			s.status.rejected.Add(1)
		}
		var fe *rulestore.FieldError
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		// Values come from anyone who can write to Redis: clip them, so a
		// huge field never makes a huge log line on every instance.
		msg := "rule rejected: keeping the last good version"
		if old == nil { // what is served instead, if anything, is logged by recoverLastGood
			msg = "rule rejected: no version of it is held here; looking for the fleet's last good version"
		}
		s.logger.Error(msg,
			zap.String("key", s.names.RuleKey(k, id)), zap.String("field", clip(field)),
			zap.Bool("has_last_good", old != nil), zap.String("error", rulestore.Clip(err.Error(), 512)))
		rulestore.EmitRejected(k, id, "redis", err)
		return nil, false
	}
	return &rulestore.Rule{Kind: k, ID: id, Fields: f, Value: v, Source: "redis", Overlay: f, Partial: st != nil}, true
}
