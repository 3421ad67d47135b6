// Command caddy is Caddy with Sluice's modules, for tests and for users who
// prefer `go build` to xcaddy. The release build is ./xcaddy/build.sh.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/sluicegw/sluice"
)

func main() { caddycmd.Main() }
