#!/usr/bin/env bash
# Ramps the search canary through the given weights, PAUSE seconds apart:
#   ./rules.sh                 # 0 10 50 100, 10 s apart
#   PAUSE=0 ./rules.sh 50      # one step: 50 %
#   PAUSE=0 ./rules.sh 0       # roll back: everyone on v1
# Each step writes the whole rule with HSET, then PUBLISHes its id, so every
# Caddy following this Redis switches together. For long ramps see
# examples/canary-ramp/ramp.sh (CONFIRM=1 waits for Enter), or the rule's
# `ramp` field (a time schedule that needs no script).
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(0 10 50 100)

first=1
for w in "${steps[@]}"; do
	[ "$first" = 1 ] || sleep "${PAUSE:-10}"
	first=0
	cli HSET gray:rule:search_ramp \
		target_version v2 fallback_version v1 hash_key userId weight "$w" >/dev/null
	cli PUBLISH gateway:rules:gray search_ramp >/dev/null
	echo "$(date -u +%H:%M:%S) search_ramp: weight $w%"
done
