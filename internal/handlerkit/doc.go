// Package handlerkit holds what Sluice's three handlers share, so each
// concern is written once:
//
//   - rule selection, one component for the three handlers: a rule id, a
//     list of rules, a route binding, inline blocks and a missing rule.
//     The Caddyfile directive (caddyfile.go, listrules.go), the JSON list
//     entry (ruleref.go), validation, provisioning and the one rule of
//     inline identity (selection.go), and per request the rule in force
//     (selector.go) or the list in force (rulelist.go);
//   - the rows of a rule kind's fields (fieldreader.go, fieldrows.go);
//   - request keys built from placeholders and presets (userId, ip, ...),
//     bounded in length and masked in logs (key*.go, mask.go);
//   - following the store: a value kept with the store's count of changes
//     (changes.go), inline rule names (inline_names.go), and missing
//     rules (missing.go);
//   - per-rule state kept across config reloads (shared.go), and the
//     handlers' module information and rule parsers (module.go);
//   - what a handler hands on: its placeholders, published lazily in one
//     slot per kind (placeholders.go), span attributes for tracing
//     (observe.go), and the status sets rules use (status.go,
//     statusset.go).
package handlerkit
