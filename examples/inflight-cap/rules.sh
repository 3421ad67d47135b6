#!/usr/bin/env bash
# Lets each user have 2 requests in flight (the service still takes 3 at
# once), live. REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:slow_report \
	qps 100 burst 100 key_resolver userId \
	max_concurrent 2 max_concurrent_total 3 concurrency_status 503
cli PUBLISH gateway:rules:rate_limit slow_report
