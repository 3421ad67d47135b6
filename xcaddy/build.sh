#!/usr/bin/env bash
# Builds ./bin/caddy: Caddy at a pinned version with Sluice from this checkout.
# xcaddy comes through the Go toolchain (go run), never a downloaded binary.
#   PLAIN=1      build the same Caddy without Sluice (make bench's baseline)
#   SLUICE_TAGS  extra build tags, e.g. sluice_floor (make bench's floor case)
# Every build gets the same flags (xcaddy's defaults, spelled out so a tag
# can be added to them) and the same Go, so binaries differ only in code.
set -euo pipefail
cd "$(dirname "$0")/.."

CADDY_VERSION="${CADDY_VERSION:-v2.11.9}"
XCADDY_VERSION="${XCADDY_VERSION:-v0.4.5}"
OUTPUT="${OUTPUT:-bin/caddy}"

mkdir -p "$(dirname "$OUTPUT")"
tags=nobadger,nomysql,nopgx${SLUICE_TAGS:+,$SLUICE_TAGS}
export XCADDY_SKIP_CLEANUP=0 CGO_ENABLED="${CGO_ENABLED:-0}" \
	XCADDY_GO_BUILD_FLAGS="-ldflags '-w -s' -trimpath -tags $tags"
with=(--with "github.com/sluicegw/sluice@v0.0.0-00010101000000-000000000000=$(pwd)")
[ "${PLAIN:-}" = 1 ] && with=()
go run "github.com/caddyserver/xcaddy/cmd/xcaddy@${XCADDY_VERSION}" build "$CADDY_VERSION" \
	--output "$OUTPUT" "${with[@]}"

"$OUTPUT" version
if [ "${PLAIN:-}" = 1 ]; then
	echo "built $OUTPUT without Sluice"
	exit 0
fi
# Read the list once: `list-modules | grep -q` under pipefail fails at
# random when grep exits early and list-modules gets SIGPIPE.
modules="$("$OUTPUT" list-modules)"
for m in http.handlers.ratelimit http.handlers.circuitbreaker http.handlers.grayroute rulestore admin.api.sluice; do
	grep -qx "$m" <<<"$modules" || { echo "module $m missing from $OUTPUT" >&2; exit 1; }
done
echo "built $OUTPUT with Sluice's modules"
