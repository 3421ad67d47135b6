#!/bin/sh
# Ramp a canary through 0 -> 10 -> 50 -> 100 percent with redis-cli.
#
#   ./ramp.sh <gray-rule-id> [steps]        e.g. ./ramp.sh checkout-canary "0 10 50 100"
#
# Each step sets only the weight field of the hash gray:rule:<id> and
# publishes the id on gateway:rules:gray, so every Caddy instance applies it
# at once. For a rule declared in the Caddyfile the hash is an overlay: its
# fields win and the Caddyfile fills in the rest (match_tag, match_value,
# fallback_version, ...), so the ramp changes the weight and nothing else.
# A rule that lives only in Redis must be complete: create it first, or set
# TARGET. Users already on the canary stay on it as the weight rises.
#
# After each step the script prints every instance's verdict from
# gateway:status:gray:<id> and stops if one rejected the change.
#
# Environment:
#   REDIS_URL     redis://[user:pass@]host:port[/db]   (used if set)
#   REDIS_HOST    default 127.0.0.1                     (if REDIS_URL is unset)
#   REDIS_PORT    default 6379
#   PAUSE         seconds between steps (default 300); 0 = no pause
#   CONFIRM=1     wait for Enter before each step instead of sleeping
#   TARGET        also set target_version before the first step (e.g. v2)
#   SETTLE        seconds to wait for the verdicts after a publish (default 1)
set -eu

id=${1:?usage: $0 <gray-rule-id> [steps]}
steps=${2:-"0 10 50 100"}
pause=${PAUSE:-300}
settle=${SETTLE:-1}

if [ -n "${REDIS_URL:-}" ]; then
	set -- -u "$REDIS_URL"
else
	set -- -h "${REDIS_HOST:-127.0.0.1}" -p "${REDIS_PORT:-6379}"
fi
rcli() { redis-cli "$@" >/dev/null; }

# Fail early if Redis is unreachable.
redis-cli "$@" PING >/dev/null

# verdicts prints each instance's verdict on the rule; it fails if one
# rejected it (the instance keeps its last good rule: see docs/rulestore.md).
verdicts() {
	sleep "$settle"
	out=$(redis-cli "$@" --raw HGETALL "gateway:status:gray:$id")
	printf '%s\n' "$out" | paste - - | sed 's/^/    /'
	case "$out" in
	*'"state":"rejected"'*)
		echo "a Caddy instance rejected the change (see above); stopping" >&2
		return 1
		;;
	esac
}

first=1
for w in $steps; do
	if [ "$first" = 0 ]; then
		if [ "${CONFIRM:-0}" = 1 ]; then
			printf 'next: weight %s%% -- press Enter (Ctrl-C to stop) ' "$w"
			read -r _
		elif [ "$pause" != 0 ]; then
			echo "waiting ${pause}s before weight $w% (Ctrl-C to stop; set the weight back with HSET to roll back)"
			sleep "$pause"
		fi
	fi
	if [ "$first" = 1 ] && [ -n "${TARGET:-}" ]; then
		rcli "$@" HSET "gray:rule:$id" target_version "$TARGET" weight "$w"
	else
		rcli "$@" HSET "gray:rule:$id" weight "$w"
	fi
	first=0
	rcli "$@" PUBLISH gateway:rules:gray "$id"
	echo "$(date -u +%H:%M:%S) gray rule $id: weight $w%"
	verdicts "$@"
done
