package handlerkit

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/rulestore"
)

// ModuleInfo is the Caddy module information of handler type T, whose
// pointer is the module.
func ModuleInfo[T any, PT interface {
	*T
	caddy.Module
}](id caddy.ModuleID) caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: id, New: func() caddy.Module { return PT(new(T)) }}
}

// RegisterParser has the rule store parse rules of kind k with parse.
func RegisterParser[R any](k rulestore.Kind, parse func(id string, f rulestore.Fields) (R, error)) {
	rulestore.RegisterParser(k, func(id string, f rulestore.Fields) (any, error) { return parse(id, f) })
}

// RegisterRules has the rule store parse rules of kind k with parse, and
// know their fields by the kind's table.
func RegisterRules[R, P any](k rulestore.Kind, fields *FieldTable[P], parse func(id string, f rulestore.Fields) (R, error)) {
	RegisterParser(k, parse)
	rulestore.RegisterFields(k, fields.Info())
}
