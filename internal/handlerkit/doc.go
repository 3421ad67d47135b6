// Package handlerkit holds what Sluice's three handlers share, so each
// concern is written once:
//
//   - directives: parsing a handler's Caddyfile block that names one rule,
//     a route, or a list of rules, inline or by id (caddyfile.go,
//     listcaddyfile.go, list.go, listrules.go), and the rows of a rule
//     kind's fields (fieldreader.go, fieldrows.go);
//   - request keys built from placeholders and presets (userId, ip, ...),
//     bounded in length and masked in logs (key*.go, mask.go);
//   - following the store: a value kept with the store's count of changes
//     (changes.go), the rule a handler applies (selector.go, rulesource.go),
//     inline rule names (inline_names.go), and missing rules (missing.go);
//   - per-rule state kept across config reloads (shared.go);
//   - what a handler hands on: its placeholders, published lazily in one
//     slot per kind (placeholders.go), span attributes for tracing
//     (observe.go), and the status sets rules use (status.go,
//     statusset.go).
package handlerkit
