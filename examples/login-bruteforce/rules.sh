#!/usr/bin/env bash
# Makes the failed-login count fleet-wide: the same rule with scope cluster,
# so every Caddy on this Redis counts one user's failures together. HSET the
# whole rule, then PUBLISH its id; every Caddy following this Redis applies
# it at once. REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:login_failures \
	limit_type sliding_window qps 0.0056 window_size 15m \
	key_resolver 'user:{http.request.header.X-Login-User}' \
	count_status 401 scope cluster
cli PUBLISH gateway:rules:rate_limit login_failures

# Back to the Caddyfile's rule: delete the Redis copy and publish.
#   cli DEL rate_limit:rule:login_failures
#   cli PUBLISH gateway:rules:rate_limit login_failures
