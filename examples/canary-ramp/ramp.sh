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
# After each step the script waits until every live instance reported on
# the version it wrote (an instance whose heartbeat in gateway:instances
# expired is stopped: shown, never waited on), prints every instance's
# verdict from gateway:status:gray:<id> and stops if a live one rejected
# the change.
#
# Environment:
#   REDIS_URL     redis://[user:pass@]host:port[/db]   (used if set)
#   REDIS_HOST    default 127.0.0.1                     (if REDIS_URL is unset)
#   REDIS_PORT    default 6379
#   PAUSE         seconds between steps (default 300); 0 = no pause
#   CONFIRM=1     wait for Enter before each step instead of sleeping
#   TARGET        also set target_version before the first step (e.g. v2)
#   SETTLE        seconds to wait for a verdict on the new version (default 5)
set -eu

id=${1:?usage: $0 <gray-rule-id> [steps]}
steps=${2:-"0 10 50 100"}
pause=${PAUSE:-300}
settle=${SETTLE:-5}

if [ -n "${REDIS_URL:-}" ]; then
	set -- -u "$REDIS_URL"
else
	set -- -h "${REDIS_HOST:-127.0.0.1}" -p "${REDIS_PORT:-6379}"
fi
rcli() { redis-cli "$@" >/dev/null; }

# Fail early if Redis is unreachable.
redis-cli "$@" PING >/dev/null

# version is the rule version the instances report for the hash as it is
# now: as the store computes it, sha256 over the sorted fields
# (name NUL value NUL), first 12 hex digits.
version() {
	redis-cli "$@" --raw HGETALL "gray:rule:$id" | paste - - | LC_ALL=C sort |
		while IFS="$tab" read -r k v; do printf '%s\0%s\0' "$k" "$v"; done |
		sha256sum | cut -c1-12
}
tab=$(printf '\t')

# live prints the heartbeat members of the instances alive now: those whose
# heartbeat in gateway:instances expires after now (Redis's clock).
live() {
	now=$(redis-cli "$@" TIME | { read -r sec; read -r usec; echo $((sec * 1000 + usec / 1000)); })
	redis-cli "$@" ZRANGEBYSCORE gateway:instances "$now" +inf
}

# is_live tells whether a verdict ($1) is a live instance's: its heartbeat
# is among the members in $2. A stopped instance's verdict stays in the
# hash (for 24 h) but is never waited on; one without a heartbeat (an older
# release) counts as live.
is_live() {
	hb=$(printf '%s' "$1" | sed -n 's/.*"heartbeat":"\([^"]*\)".*/\1/p')
	[ -z "$hb" ] || printf '%s\n' "$2" | grep -qx "$hb"
}

# verdicts waits (up to SETTLE seconds) until every live instance reported
# on the version just written, prints each instance's verdict, marking
# those still on an older version and stopped ones, and fails if a live
# instance rejected this version (it keeps its last good rule: see
# docs/rulestore.md).
verdicts() {
	want=$(version "$@")
	tries=$((settle * 10))
	while :; do
		out=$(redis-cli "$@" --raw HGETALL "gateway:status:gray:$id")
		members=$(live "$@")
		waiting=$(printf '%s\n' "$out" | paste - - | while IFS="$tab" read -r who verdict; do
			[ -n "$who" ] && is_live "$verdict" "$members" || continue
			case "$verdict" in *"\"version\":\"$want\""*) echo "seen" ;; *) echo "waiting $who" ;; esac
		done)
		case "$waiting" in
		*waiting*) ;;
		*seen*) break ;;
		esac
		if [ "$tries" -le 0 ]; then
			echo "    not every live instance reported on version $want within ${settle}s" >&2
			break
		fi
		tries=$((tries - 1))
		sleep 0.1
	done
	rejected=0
	printf '%s\n' "$out" | paste - - | while IFS="$tab" read -r who verdict; do
		[ -n "$who" ] || continue
		if ! is_live "$verdict" "$members"; then
			echo "    $who $verdict (stopped: not waited on)"
			continue
		fi
		case "$verdict" in
		*"\"version\":\"$want\""*) echo "    $who $verdict" ;;
		*) echo "    $who $verdict (an older version: not seen yet)" ;;
		esac
	done
	for v in $(printf '%s\n' "$out" | paste - - | cut -f2 | tr -d ' '); do
		if is_live "$v" "$members"; then
			case "$v" in *"\"state\":\"rejected\",\"version\":\"$want\""*) rejected=1 ;; esac
		fi
	done
	if [ "$rejected" = 1 ]; then
		echo "a live Caddy instance rejected the change (see above); stopping" >&2
		return 1
	fi
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
