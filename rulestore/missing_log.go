package rulestore

import (
	"time"

	"go.uber.org/zap"
)

// missingWarn is a warning about a missing rule, queued by a request.
type missingWarn struct {
	kind  Kind
	id    string
	msg   string
	since time.Time
}

// missingWarnQueue bounds the warnings waiting to be logged; a request
// that finds the queue full leaves its warning to a later request.
const missingWarnQueue = 1024

// logMissing writes the queued missing-rule warnings until the config is
// unloaded. The ids a suggestion is searched in are listed once per store
// change, not once per warning. Once a second, after a store change, it
// forgets the missing ids that arrived, so ids that come and go leave no
// entry behind even when nobody reads the state.
func (a *App) logMissing() {
	ids := make([][]string, NumKinds())
	listedAt := make([]uint64, NumKinds())
	sweep := time.NewTicker(time.Second)
	defer sweep.Stop()
	var swept uint64
	for {
		select {
		case <-sweep.C:
			if changes := a.Changes(); changes != swept {
				swept = changes
				a.forgetArrived()
			}
		case w := <-a.missingWarns:
			if changes := a.Changes(); ids[w.kind] == nil || listedAt[w.kind] != changes {
				ids[w.kind], listedAt[w.kind] = sortedIDs(a.Rules(w.kind)), changes
			}
			f := []zap.Field{zap.String("kind", w.kind.String()), zap.String("id", w.id)}
			if s := Suggest(w.id, ids[w.kind]...); s != "" && s != w.id {
				f = append(f, zap.String("did_you_mean", s))
			}
			a.logger.Warn(w.msg, append(f, zap.Time("missing_since", w.since))...)
		case <-a.ctx.Done():
			return
		}
	}
}

// forgetArrived drops the missing entries of rules the store now holds.
func (a *App) forgetArrived() {
	a.missing.Range(func(key, _ any) bool {
		if ref := key.(RuleRef); a.Lookup(ref.Kind, ref.ID) != nil {
			a.missing.Delete(key)
		}
		return true
	})
}
