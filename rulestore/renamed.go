package rulestore

import "go.uber.org/zap"

// renamed holds the fields still accepted under an old name, by
// "<kind> <old name>": the name to use instead (see registry for why a
// package-level registry).
var renamed registry[string]

// RegisterRenamedField keeps field old of kind k accepted, with a
// deprecation warning in the log naming use instead, wherever a rule is
// accepted (the config, Redis, an inline rule). Call it from init.
func RegisterRenamedField(k Kind, old, use string) { renamed.put(k.String()+" "+old, use) }

// WarnRenamed logs a deprecation warning for each field of f given under
// an old name.
func (a *App) WarnRenamed(k Kind, id string, f Fields) { warnRenamed(a.logger, k, id, f) }

func warnRenamed(logger *zap.Logger, k Kind, id string, f Fields) {
	if logger == nil {
		return
	}
	for name := range f {
		if use := renamed.get(k.String() + " " + name); use != "" {
			logger.Warn("deprecated rule field: use "+use+" instead",
				zap.String("kind", k.String()), zap.String("rule", id), zap.String("field", name), zap.String("use", use))
		}
	}
}
