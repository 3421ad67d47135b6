#!/usr/bin/env bash
# Stops serving over-limit traffic: the team rule with over_limit refuse,
# HSET whole, then PUBLISH its id; every Caddy following this Redis applies
# it at once, and a team over its share is refused with 429 instead of
# demoted.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:team \
	qps 10 burst 20 \
	key_resolver '{http.request.header.X-Org}/{http.request.header.X-Team}' \
	parent org parent_key '{http.request.header.X-Org}' guarantee 50% \
	over_limit refuse
cli PUBLISH gateway:rules:rate_limit team

# Back to the Caddyfile's rule: delete the Redis copy and publish.
#   cli DEL rate_limit:rule:team
#   cli PUBLISH gateway:rules:rate_limit team
