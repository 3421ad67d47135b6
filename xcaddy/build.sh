#!/usr/bin/env bash
# Builds ./bin/caddy: Caddy at a pinned version with Sluice from this checkout.
# xcaddy comes through the Go toolchain (go run), never a downloaded binary.
set -euo pipefail
cd "$(dirname "$0")/.."

CADDY_VERSION="${CADDY_VERSION:-v2.11.9}"
XCADDY_VERSION="${XCADDY_VERSION:-v0.4.5}"
OUTPUT="${OUTPUT:-bin/caddy}"

mkdir -p "$(dirname "$OUTPUT")"
export XCADDY_SKIP_CLEANUP=0 CGO_ENABLED="${CGO_ENABLED:-0}"
go run "github.com/caddyserver/xcaddy/cmd/xcaddy@${XCADDY_VERSION}" build "$CADDY_VERSION" \
	--output "$OUTPUT" \
	--with "github.com/sluicegw/sluice@v0.0.0-00010101000000-000000000000=$(pwd)"

"$OUTPUT" version
# Read the list once: `list-modules | grep -q` under pipefail fails at
# random when grep exits early and list-modules gets SIGPIPE.
modules="$("$OUTPUT" list-modules)"
for m in http.handlers.ratelimit http.handlers.circuitbreaker http.handlers.grayroute rulestore admin.api.sluice; do
	grep -qx "$m" <<<"$modules" || { echo "module $m missing from $OUTPUT" >&2; exit 1; }
done
echo "built $OUTPUT with Sluice's modules"
