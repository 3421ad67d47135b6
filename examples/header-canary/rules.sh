#!/usr/bin/env bash
# Moves the canary to another audience live: users whose X-Group is beta or
# staff go to v2; X-Canary no longer counts. HSET the whole rule, then PUBLISH.
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }

cli HSET gray:rule:checkout_canary \
	match_tag X-Group match_value "beta,staff" target_version v2 fallback_version v1
cli PUBLISH gateway:rules:gray checkout_canary

# Back to the Caddyfile's rule:
#   cli DEL gray:rule:checkout_canary
#   cli PUBLISH gateway:rules:gray checkout_canary
