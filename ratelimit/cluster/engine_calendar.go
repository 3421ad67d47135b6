package cluster

import (
	"github.com/sluicegw/sluice/ratelimit/engine"
)

// callCalendar runs calendarLua for one decision of rule r (quota l) at
// engine time now, and fills in the times from the window: a refusal
// waits until the window ends, and so does the reset.
func (e *Engine) callCalendar(b *Batcher, prefix string, r *Rule, l *engine.Limits, key []byte, now, min, max int64) (string, Grant, error) {
	wall := engine.Wall(now)
	w := r.Calendar.Window(wall)
	rkey := CalendarRedisKey(prefix, r.ID, key, w.Start)
	g, err := b.RunScript(CalendarScript, true, rkey, [4]any{l.ScriptArgs[1], w.ExpireAt, min, max}, r.RedisTimeout)
	if err != nil {
		return rkey, g, err
	}
	g.Reset = w.End - wall
	if g.Wait > 0 {
		g.Wait = g.Reset
	}
	return rkey, g, nil
}

// settleCalendar charges n units to key's count in Redis, in the window
// of now, and reports whether Redis took it and it took the key into debt.
func (e *Engine) settleCalendar(b *Batcher, prefix string, r *Rule, key []byte, now, n int64) (applied, debt bool) {
	w := r.Calendar.Window(engine.Wall(now))
	res, err := b.RunScript(CalendarSettleScript, false, CalendarRedisKey(prefix, r.ID, key, w.Start),
		[4]any{n, w.ExpireAt, r.LimitsFor(key).QuotaStr}, r.RedisTimeout)
	return err == nil, err == nil && res.Wait != 0
}
