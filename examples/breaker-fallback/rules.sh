#!/usr/bin/env bash
# Forces the inventory breaker open live (maintenance: every request gets the
# fallback, nothing reaches the service), or gives it back to the automatic
# breaker:  ./rules.sh force_open   |   ./rules.sh auto
# REDIS_CLI_ARGS passes host/port, e.g. "-h 127.0.0.1 -p 6379".
set -euo pipefail
cli() { redis-cli ${REDIS_CLI_ARGS:-} "$@"; }
state=${1:-force_open}

cli HSET circuit_breaker:rule:inventory \
	failure_threshold 3 success_threshold 2 open_duration 3s handle_errors true \
	state "$state"
cli PUBLISH gateway:rules:circuit_breaker inventory
