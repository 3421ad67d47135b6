package rulestore

import (
	"time"

	"go.uber.org/zap"
)

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
				a.missing.Forget(a.holds)
			}
		case w := <-a.missing.Warnings():
			k, id := w.Ref.Kind, w.Ref.ID
			if changes := a.Changes(); ids[k] == nil || listedAt[k] != changes {
				ids[k], listedAt[k] = sortedIDs(a.Rules(k)), changes
			}
			f := []zap.Field{zap.String("kind", k.String()), zap.String("id", id)}
			if s := Suggest(id, ids[k]...); s != "" && s != id {
				f = append(f, zap.String("did_you_mean", s))
			}
			a.logger.Warn(w.Msg, append(f, zap.Time("missing_since", w.Since))...)
		case <-a.ctx.Done():
			return
		}
	}
}

// holds reports whether the store now holds the rule ref names.
func (a *App) holds(ref RuleRef) bool { return a.Lookup(ref.Kind, ref.ID) != nil }
