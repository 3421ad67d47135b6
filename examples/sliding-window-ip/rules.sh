#!/usr/bin/env bash
# Raises the per-IP window live to 30 requests per 10 s (qps 3 x window 10).
# Only the numbers change, so the counters are kept: an IP that was refused
# is let through again as soon as the rule arrives.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:per_ip \
	limit_type sliding_window qps 3 window_size 10 key_resolver ip \
	body "Too many requests from {http.ratelimit.key}: retry in {http.ratelimit.retry_after}s"
cli PUBLISH gateway:rules:rate_limit per_ip
