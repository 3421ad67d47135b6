package rulestore

import (
	"reflect"

	"go.uber.org/zap"
)

// A Spec field tagged renamed:"<name>" is still read under its own json
// name, with a deprecation warning in the log naming <name> instead,
// wherever a rule is accepted (the config, Redis, an inline rule); e.g.
// CircuitBreakerSpec.Header, renamed headers. The kind's schema declares
// it, so no package registers it.

// specRenamed maps the old names of a Spec's renamed fields to the names
// to use (nil: none).
func specRenamed(s Spec) map[string]string {
	t := reflect.TypeOf(s)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	var out map[string]string
	for _, sf := range reflect.VisibleFields(t.Elem()) {
		if use := sf.Tag.Get("renamed"); use != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[jsonName(sf)] = use
		}
	}
	return out
}

// WarnRenamed logs a deprecation warning for each field of f given under
// an old name.
func (a *App) WarnRenamed(k Kind, id string, f Fields) { WarnRenamed(a.logger, k, id, f) }

func WarnRenamed(logger *zap.Logger, k Kind, id string, f Fields) {
	info, ok := k.Info()
	if logger == nil || !ok || info.renamed == nil {
		return
	}
	for name := range f {
		if use := info.renamed[name]; use != "" {
			logger.Warn("deprecated rule field: use "+use+" instead",
				zap.String("kind", k.String()), zap.String("rule", id), zap.String("field", name), zap.String("use", use))
		}
	}
}
