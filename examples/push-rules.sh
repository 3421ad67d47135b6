#!/usr/bin/env bash
# Pushes rules to Redis the way users do: HSET the rule, then PUBLISH its id.
# Every Caddy running Sluice against this Redis applies them within
# milliseconds. REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

# The seed's order API: a token bucket per user, 100 req/s, bursts of 110.
cli HSET rate_limit:rule:order_api limit_type TOKEN_BUCKET qps 100 burst 110 key_resolver userId
cli PUBLISH gateway:rules:rate_limit order_api

# Payments: a sliding window per client IP, 500 requests per second.
cli HSET rate_limit:rule:payment_api limit_type SLIDING_WINDOW qps 500 window_size 1 key_resolver ip
cli PUBLISH gateway:rules:rate_limit payment_api

# A canary: VIP users (X-Vip: true) to v2, 100 % of them.
cli HSET gray:rule:product_detail match_tag X-Vip match_value true target_version v2 weight 100 fallback_version v1
cli PUBLISH gateway:rules:gray product_detail

# Deleting a rule: DEL then PUBLISH; a rule also declared in the Caddyfile
# falls back to that static version.
#   cli DEL rate_limit:rule:payment_api
#   cli PUBLISH gateway:rules:rate_limit payment_api
