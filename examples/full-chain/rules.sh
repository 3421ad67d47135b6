#!/usr/bin/env bash
# Changes the full chain live: a tighter limit (1/s, bursts of 3 per user) and
# half of all users on the v2 canary. Each rule: HSET the whole rule, then
# PUBLISH its id. REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:order_api limit_type token_bucket qps 1 burst 3 key_resolver userId
cli PUBLISH gateway:rules:rate_limit order_api

cli HSET gray:rule:order_ramp target_version v2 fallback_version v1 weight 50
cli PUBLISH gateway:rules:gray order_ramp

# Rebinding the route moves it to other rules, e.g. no canary at all:
#   cli HSET gateway:binding:orders rate_limit order_api circuit_breaker order_cb gray ""
#   cli PUBLISH gateway:rules:binding orders
