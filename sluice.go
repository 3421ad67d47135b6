// Package sluice brings all of Sluice's Caddy modules into a Caddy build:
// xcaddy build --with github.com/sluicegw/sluice
package sluice

import (
	_ "github.com/sluicegw/sluice/caddyfile"
	_ "github.com/sluicegw/sluice/circuitbreaker"
	_ "github.com/sluicegw/sluice/clicmd"
	_ "github.com/sluicegw/sluice/grayroute"
	_ "github.com/sluicegw/sluice/ratelimit"
	_ "github.com/sluicegw/sluice/rulestore"
	_ "github.com/sluicegw/sluice/rulestore/admin"
	_ "github.com/sluicegw/sluice/rulestore/redissource"
)
