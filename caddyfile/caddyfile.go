// Package caddyfile wires Sluice into the Caddyfile: the ratelimit,
// circuitbreaker, grayroute and sluice_status directives, their place in the directive
// order, and the global rulestore option.
package caddyfile

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/sluicegw/sluice/circuitbreaker"
	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/ratelimit"
	"github.com/sluicegw/sluice/rulestore/admin"
	_ "github.com/sluicegw/sluice/rulestore/redissource" // the global rulestore option's redis
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("ratelimit", ratelimit.ParseCaddyfile)
	httpcaddyfile.RegisterHandlerDirective("circuitbreaker", circuitbreaker.ParseCaddyfile)
	httpcaddyfile.RegisterHandlerDirective("grayroute", grayroute.ParseCaddyfile)
	httpcaddyfile.RegisterHandlerDirective("sluice_status", admin.ParseStatusCaddyfile)

	// rate limit -> circuit breaker -> gray route, after authentication (so
	// a user id is known) and before handle/route blocks and reverse_proxy,
	// so `handle @v2 { reverse_proxy ... }` sees the gray decision and the
	// breaker sees the proxy's outcome. Only standard directives can anchor
	// the order; each insert before request_header lands after the last.
	httpcaddyfile.RegisterDirectiveOrder("ratelimit", httpcaddyfile.Before, "request_header")
	httpcaddyfile.RegisterDirectiveOrder("circuitbreaker", httpcaddyfile.Before, "request_header")
	httpcaddyfile.RegisterDirectiveOrder("grayroute", httpcaddyfile.Before, "request_header")
	// The status page answers like respond: after authentication.
	httpcaddyfile.RegisterDirectiveOrder("sluice_status", httpcaddyfile.Before, "respond")

	httpcaddyfile.RegisterGlobalOption("rulestore", parseRulestore)
}
