#!/usr/bin/env bash
# Gives the quota gateway (:8081) the adaptive in-flight limit as well,
# live: the quota stays for fairness, the limit protects the service.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET rate_limit:rule:quota \
	qps 40 burst 40 key_resolver global \
	max_concurrent adaptive min_limit 4 initial_limit 8 sample_window 250ms \
	concurrency_status 503
cli PUBLISH gateway:rules:rate_limit quota
