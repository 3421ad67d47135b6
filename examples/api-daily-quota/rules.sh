#!/usr/bin/env bash
# Gives the partner key 100,000 requests a day: the daily rule with an
# override, HSET whole, then PUBLISH its id; every Caddy following this
# Redis applies it at once, and every other key keeps its 1,000.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:api_per_day \
	quota 1000 period day timezone UTC \
	key_resolver '{http.request.header.X-Api-Key}' on_empty_key 'deny 401' \
	overrides 'key0:partner=100000'
cli PUBLISH gateway:rules:rate_limit api_per_day

# Back to the Caddyfile's rule: delete the Redis copy and publish.
#   cli DEL rate_limit:rule:api_per_day
#   cli PUBLISH gateway:rules:rate_limit api_per_day
