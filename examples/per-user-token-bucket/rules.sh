#!/usr/bin/env bash
# Changes the order API's limit live: 1 request/s in bursts of 3 per user,
# and the user "vip" gets 50/s in bursts of 100. HSET the whole rule, then
# PUBLISH its id; every Caddy following this Redis applies it at once.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:orders_per_user \
	limit_type token_bucket qps 1 burst 3 key_resolver userId \
	overrides "user:vip=50/100"
cli PUBLISH gateway:rules:rate_limit orders_per_user

# Back to the Caddyfile's rule: delete the Redis copy and publish.
#   cli DEL rate_limit:rule:orders_per_user
#   cli PUBLISH gateway:rules:rate_limit orders_per_user
