#!/usr/bin/env bash
# Serves examples/Caddyfile with the binary from `make build`.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SLUICE_REDIS:=redis://127.0.0.1:6379}"
: "${GATEWAY_PORT:=8080}" "${ADMIN_PORT:=2019}"
export SLUICE_REDIS GATEWAY_PORT ADMIN_PORT

hostport="${SLUICE_REDIS#*://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
if (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then
	redis_note="Redis at $SLUICE_REDIS: rules pushed there apply live (examples/push-rules.sh)."
else
	redis_note="No Redis at $SLUICE_REDIS: serving the rules declared in examples/Caddyfile (Sluice keeps retrying in the background)."
fi

cat <<MSG

  Sluice example: rate limit -> circuit breaker -> gray route -> reverse_proxy
  $redis_note

  Try, in another terminal:
    curl -i localhost:$GATEWAY_PORT/                          # v1, with X-RateLimit-* headers
    curl -i -H 'X-Canary: true' localhost:$GATEWAY_PORT/      # the canary, v2
    for i in \$(seq 12); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: alice' localhost:$GATEWAY_PORT/; done; echo
                                                     # 200s, then 429s: 5 req/s, burst 10, per user
    for i in \$(seq 8); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: carol' localhost:$GATEWAY_PORT/flaky; done; echo
                                                     # 500s from upstream, then 503s: the breaker opened
    curl -s localhost:$ADMIN_PORT/sluice/rules/rate_limit   # the rules in force

  Status page (rules, limits, breakers, canaries; live): http://localhost:$ADMIN_PORT/sluice/ui/

  Ctrl-C stops it.

MSG
exec bin/caddy run --config examples/Caddyfile --adapter caddyfile
