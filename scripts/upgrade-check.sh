#!/usr/bin/env bash
# A rolling upgrade, measured with real binaries (docs/ratelimit-cluster.md,
# "Upgrading from the hash format"): builds the previous release from git
# (PREV_REV, default 1f9b4eb^, the last build with hash state) and this
# checkout (or NEW_REV) as make build does, starts one redis-server and one
# Caddy of each on free loopback ports with the same cluster-scope rules
# (token bucket and sliding window, on_redis_error deny; redis_timeout 1s:
# this counts format clashes, not a busy machine's slow answers), and drives
# traffic through them with scripts/upgradecheck: old only, both, new only.
# Not part of make test (two Caddy builds take minutes).
#   scripts/upgrade-check.sh                       # previous release vs this checkout
#   NEW_REV=<commit> scripts/upgrade-check.sh       # ... vs another commit
#   PREV_BIN=... NEW_BIN=... scripts/upgrade-check.sh   # reuse binaries
# PHASE (default 10s), KEYS (4), RATE (20 requests/s per key) shape the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
PREV_REV="${PREV_REV:-1f9b4eb^}"
NEW_REV="${NEW_REV:-}"
work="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for d in "$work"/src-*; do [ -d "$d" ] && git -C "$root" worktree remove --force "$d"; done
	rm -rf "$work"
}
trap cleanup EXIT

# build REV OUTPUT: Caddy with Sluice at REV (empty: this checkout).
build() {
	if [ -z "$1" ]; then
		OUTPUT="$2" ./xcaddy/build.sh >"$2.log" 2>&1 || { cat "$2.log"; exit 1; }
		return
	fi
	local src="$work/src-$(basename "$2")"
	git worktree add --detach --quiet "$src" "$1"
	(cd "$src" && OUTPUT="$2" ./xcaddy/build.sh) >"$2.log" 2>&1 || { cat "$2.log"; exit 1; }
}

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

old_bin="${PREV_BIN:-$work/caddy-old}"
new_bin="${NEW_BIN:-$work/caddy-new}"
if [ -z "${PREV_BIN:-}" ]; then
	echo "building the previous release ($PREV_REV = $(git rev-parse --short "$PREV_REV"))..."
	build "$(git rev-parse "$PREV_REV")" "$old_bin"
fi
if [ -z "${NEW_BIN:-}" ]; then
	echo "building ${NEW_REV:-this checkout}..."
	build "${NEW_REV:+$(git rev-parse "$NEW_REV")}" "$new_bin"
fi

redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)

cat >"$work/Caddyfile" <<'CADDY'
{
	admin 127.0.0.1:{$ADMIN_PORT}
	default_bind 127.0.0.1
	rulestore {
		redis {$SLUICE_REDIS}
		rate_limit upgrade_tb {
			scope cluster
			qps 5
			burst 10
			key_resolver {http.request.header.X-Api-Key} ip
			on_redis_error deny
			redis_timeout 1s
		}
		rate_limit upgrade_sw {
			scope cluster
			limit_type sliding_window
			qps 5
			window_size 2s
			key_resolver {http.request.header.X-Api-Key} ip
			on_redis_error deny
			redis_timeout 1s
		}
	}
}

http://127.0.0.1:{$GATEWAY_PORT} {
	handle /tb {
		ratelimit upgrade_tb
		respond "ok"
	}
	handle /sw {
		ratelimit upgrade_sw
		respond "ok"
	}
}
CADDY

# start NAME BIN: one Caddy on free ports; prints its gateway port. A port
# taken between the probe and Caddy's listen (other processes on this
# machine) means new ports, up to three times.
start() {
	local gw admin pid
	mkdir -p "$work/home-$1"
	for _ in 1 2 3; do
		gw="$(free_port)"
		admin="$(free_port)"
		HOME="$work/home-$1" XDG_DATA_HOME="$work/home-$1" XDG_CONFIG_HOME="$work/home-$1" \
			SLUICE_REDIS="redis://127.0.0.1:$redis_port" GATEWAY_PORT="$gw" ADMIN_PORT="$admin" \
			"$2" run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy-$1.log" 2>&1 &
		pid=$!
		for _ in $(seq 150); do
			kill -0 "$pid" 2>/dev/null || break
			if curl -fsS -o /dev/null -H "X-Api-Key: ready" "http://127.0.0.1:$gw/tb" 2>/dev/null &&
				curl -fsS -o /dev/null -H "X-Api-Key: ready" "http://127.0.0.1:$gw/sw" 2>/dev/null; then
				echo "$pid $gw"
				return
			fi
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		grep -q 'address already in use' "$work/caddy-$1.log" || break
	done
	echo "caddy $1 did not come up:" >&2
	cat "$work/caddy-$1.log" >&2
	exit 1
}
read -r old_pid old_port <<<"$(start old "$old_bin")" || true
[ -n "${old_port:-}" ] || exit 1
pids+=("$old_pid")
read -r new_pid new_port <<<"$(start new "$new_bin")" || true
[ -n "${new_port:-}" ] || exit 1
pids+=("$new_pid")
"$old_bin" version | sed 's/^/old: /'
"$new_bin" version | sed 's/^/new: /'

status=0
go run ./scripts/upgradecheck -old "http://127.0.0.1:$old_port" -new "http://127.0.0.1:$new_port" \
	-keys "${KEYS:-4}" -rate "${RATE:-20}" -phase "${PHASE:-10s}" -qps 5 -window 2s || status=$?

echo
echo "state keys in Redis (type, name):"
for k in $(redis-cli -p "$redis_port" --scan --pattern '*ratelimit:*' | sort); do
	echo "  $(redis-cli -p "$redis_port" type "$k") $k"
done
echo
for b in old new; do
	echo "caddy $b log: $(grep -ci 'wrongtype' "$work/caddy-$b.log" || true) lines mentioning WRONGTYPE, $(grep -c '"level":"\(warn\|error\)"' "$work/caddy-$b.log" || true) warnings and errors"
	grep '"level":"\(warn\|error\)"' "$work/caddy-$b.log" | head -3 | cut -c1-300 | sed 's/^/  /'
done
exit "$status"
