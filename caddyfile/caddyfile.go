// Package caddyfile wires Sluice into the Caddyfile: the ratelimit,
// circuitbreaker and grayroute directives, their place in the directive
// order, and the global rulestore option.
package caddyfile

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/sluicegw/sluice/circuitbreaker"
	"github.com/sluicegw/sluice/grayroute"
	"github.com/sluicegw/sluice/ratelimit"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("ratelimit", ratelimit.ParseCaddyfile)
	httpcaddyfile.RegisterHandlerDirective("circuitbreaker", circuitbreaker.ParseCaddyfile)
	httpcaddyfile.RegisterHandlerDirective("grayroute", grayroute.ParseCaddyfile)

	// rate limit -> circuit breaker -> gray route, after authentication (so
	// a user id is known) and before handle/route blocks and reverse_proxy,
	// so `handle @v2 { reverse_proxy ... }` sees the gray decision and the
	// breaker sees the proxy's outcome.
	httpcaddyfile.RegisterDirectiveOrder("ratelimit", httpcaddyfile.After, "forward_auth")
	httpcaddyfile.RegisterDirectiveOrder("circuitbreaker", httpcaddyfile.After, "ratelimit")
	httpcaddyfile.RegisterDirectiveOrder("grayroute", httpcaddyfile.After, "circuitbreaker")

	httpcaddyfile.RegisterGlobalOption("rulestore", parseRulestore)
}
