package rulestore

import "go.uber.org/zap"

// typoOf returns the rule id of kind k, other than id, that the store holds
// (declared in the config, or loaded) and that is close enough to id to
// be what was meant: "" if none.
func (a *App) typoOf(k Kind, id string) string {
	if s := Suggest(id, sortedIDs(a.Rules(k))...); s != id {
		return s
	}
	return ""
}

// warnTypo warns, when a handler is provisioned with Redis configured,
// about a reference to a rule the config does not declare while one close
// to it is declared: most likely a typo that would leave the route
// unprotected, though the rule may also arrive from Redis. `caddy validate`
// shows it.
func (a *App) warnTypo(k Kind, id string) {
	if s := a.typoOf(k, id); s != "" {
		a.logger.Warn("rule not declared in the config, but one with a close id is: a typo? (it may also arrive from redis)",
			zap.String("kind", k.String()), zap.String("id", id), zap.String("did_you_mean", s))
	}
}
