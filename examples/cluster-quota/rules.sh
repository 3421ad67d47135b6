#!/usr/bin/env bash
# Doubles the fleet-wide quota live: 20 requests/s per API key, bursts of 20.
# Every instance on this Redis applies it at once. REDIS_CLI_ARGS passes
# host/port, e.g. "-p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }
cli HSET rate_limit:rule:partner_api scope cluster limit_type TOKEN_BUCKET qps 20 burst 20 \
	key_resolver '{http.request.header.X-Api-Key} ip' on_redis_error local
cli PUBLISH gateway:rules:rate_limit partner_api
