#!/usr/bin/env bash
# make demo: Sluice's full chain, live, in about half a minute.
#
# Starts, on free 127.0.0.1 ports: a throwaway redis-server (if installed;
# else the demo runs on the rules in the Caddyfile), two upstreams v1 and v2
# (examples/upstream) and bin/caddy with examples/full-chain/Caddyfile. Then
# it shows, with the curl and redis-cli lines it runs: a request through the
# chain, a header canary, a rate limit hit, a rule changed live, a breaker
# opening and recovering, a canary ramp 0 -> 50 -> 100 %. Everything it
# started is stopped on exit (also on Ctrl-C); nothing is written outside a
# temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x bin/caddy ]; then
	echo "bin/caddy is missing: run make build (or make demo)" >&2
	exit 1
fi
command -v curl >/dev/null || { echo "the demo needs curl" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'echo; echo "interrupted"; exit 130' INT TERM

# free_port VAR: a loopback port nobody listens on (and not handed out yet).
handed_out=" "
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		case "$handed_out" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			handed_out="$handed_out$p "
			printf -v "$1" %s "$p"
			return
		fi
	done
}

# wait_for WHAT CMD...: run CMD until it succeeds, for at most 10 s.
wait_for() {
	local what=$1 i
	shift
	for i in $(seq 200); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.05
	done
	fail "timed out waiting for $what"
}
fail() {
	echo "demo: $*" >&2
	tail -n 5 "$work"/*.log >&2 2>/dev/null || true
	exit 1
}

# launch NAME CHECK-CMD START-CMD...: start a process in the background
# (output in $work/NAME.log) and wait until CHECK-CMD succeeds. Returns 1 if
# the process dies first (a port taken since free_port looked: pick another).
launch() {
	local name=$1 check=$2 pid i
	shift 2
	"$@" >"$work/$name.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	for i in $(seq 200); do
		if eval "$check" >/dev/null 2>&1; then return 0; fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	fail "timed out waiting for $name"
}

step() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
# run CMD: print it as you would type it, run it, indent what it prints.
run() {
	printf '$ %s\n' "$1"
	eval "$1" 2>&1 | sed 's/^/    /'
}

echo "Building the example upstream (examples/upstream)..."
go build -o "$work/upstream" ./examples/upstream

for v in v1 v2; do
	for attempt in 1 2 3 4; do
		free_port port
		if launch "$v" "curl -sf http://127.0.0.1:$port/" \
			"$work/upstream" -addr "127.0.0.1:$port" -version "$v" -name "upstream $v"; then
			break
		fi
		[ "$attempt" != 4 ] || fail "upstream $v would not start"
	done
	printf -v "upstream_$v" %s "127.0.0.1:$port"
done

have_redis=0
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	for attempt in 1 2 3 4; do
		free_port REDIS
		if launch redis "redis-cli -p $REDIS ping" redis-server --port "$REDIS" --bind 127.0.0.1 \
			--save '' --appendonly no --dir "$work"; then
			have_redis=1
			break
		fi
		[ "$attempt" != 4 ] || fail "redis-server would not start"
	done
else
	free_port REDIS # nothing listens there: the rule store retries quietly
fi
rcli="redis-cli -p $REDIS"

export SLUICE_REDIS="redis://127.0.0.1:$REDIS"
export SLUICE_V1="$upstream_v1" SLUICE_V2="$upstream_v2"
# Caddy's autosave and storage go to the temporary directory.
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data"
for attempt in 1 2 3 4; do
	free_port GW
	free_port ADMIN
	free_port SPARE1
	free_port SPARE2
	export SLUICE_GATEWAY="127.0.0.1:$GW" SLUICE_ADMIN="127.0.0.1:$ADMIN"
	# The Caddyfile's own stand-in upstreams go to spare ports: the programs answer.
	export SLUICE_STANDIN_V1="127.0.0.1:$SPARE1" SLUICE_STANDIN_V2="127.0.0.1:$SPARE2"
	if launch caddy "curl -sf http://$SLUICE_ADMIN/sluice/store && curl -s -o /dev/null http://$SLUICE_GATEWAY/" \
		bin/caddy run --config examples/full-chain/Caddyfile --adapter caddyfile; then
		break
	fi
	[ "$attempt" != 4 ] || fail "caddy would not start"
done

gw="http://$SLUICE_GATEWAY"
admin="http://$SLUICE_ADMIN"
cat <<MSG

Sluice demo: rate limit -> circuit breaker -> gray route -> reverse_proxy
  gateway   $gw         (examples/full-chain/Caddyfile)
  admin     $admin
  upstreams v1 http://$SLUICE_V1, v2 http://$SLUICE_V2   (examples/upstream)
MSG
if [ "$have_redis" = 1 ]; then
	wait_for "the rule store to connect to Redis" \
		sh -c "curl -s $admin/sluice/store | grep -q '\"connected\":true'"
	echo "  redis     127.0.0.1:$REDIS (a throwaway redis-server): rules change live"
else
	echo "  redis     not installed: the demo runs on the rules in the Caddyfile"
	echo "            (apt-get install redis-server to see live changes)"
fi

# ---------------------------------------------------------------------------
step "1. A request through the chain: rate-limit headers, the version that answered"
run "curl -si -H 'X-User-Id: alice' $gw/ | grep -i -e '^HTTP' -e '^x-ratelimit' -e '^x-served' -e '^v[12]'"

step "2. A header-matched canary: X-Canary: true goes to v2"
run "curl -s -H 'X-Canary: true' $gw/"

step "3. Limits: 5 requests/s per user, bursts of 10 (rule order_api)"
run "for i in \$(seq 12); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: bob' $gw/; done; echo"
run "curl -si -H 'X-User-Id: bob' $gw/ | grep -i -e '^HTTP' -e '^retry-after' -e '^{'"
note "bob's burst is spent; other users have their own buckets:"
run "curl -s -o /dev/null -w '%{http_code}\n' -H 'X-User-Id: carol' $gw/"

# wait_rule KIND/ID SNIPPET: until the admin API shows the rule with SNIPPET.
wait_rule() {
	wait_for "rule $1 with $2" sh -c "curl -s $admin/sluice/rules/$1 | grep -qF '$2'"
}

step "4. A rule changed live with redis-cli: bursts of 3, 1 request/s"
if [ "$have_redis" = 1 ]; then
	run "$rcli HSET rate_limit:rule:order_api limit_type token_bucket qps 1 burst 3 key_resolver userId"
	run "$rcli PUBLISH gateway:rules:rate_limit order_api"
	wait_rule rate_limit/order_api '"burst":"3"'
	run "curl -s $admin/sluice/rules/rate_limit/order_api"
	run "for i in \$(seq 5); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: dave' $gw/; done; echo"
	note "deleting the Redis rule brings back the Caddyfile's (bursts of 10):"
	run "$rcli DEL rate_limit:rule:order_api"
	run "$rcli PUBLISH gateway:rules:rate_limit order_api"
	wait_rule rate_limit/order_api '"source":"static"'
	run "for i in \$(seq 12); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: erin' $gw/; done; echo"
else
	note "skipped: needs redis-server (HSET rate_limit:rule:order_api ..., then PUBLISH gateway:rules:rate_limit order_api)"
fi

step "5. A breaker opening and recovering (3 failures in a row open it for 5 s)"
note "v1 starts failing (the upstream's own control endpoint):"
run "curl -s -X POST 'http://$SLUICE_V1/fail-rate?value=1'"
run "for i in \$(seq 6); do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: frank' $gw/; done; echo"
note "three 500s from v1, then 503 at once: the breaker is open and v1 is left alone"
run "curl -si -H 'X-User-Id: frank' $gw/ | grep -i -e '^HTTP' -e '^retry-after'"
note "v1 recovers:"
run "curl -s -X POST 'http://$SLUICE_V1/fail-rate?value=0'"
printf '$ %s\n' "while sleep 1; do curl -s -o /dev/null -w '%{http_code} ' -H 'X-User-Id: grace' $gw/; done"
printf '    '
for i in $(seq 15); do
	sleep 1
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-User-Id: grace' "$gw/")
	printf '%s ' "$code"
	[ "$code" = 200 ] && break
done
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-User-Id: grace' "$gw/")
printf '%s\n' "$code"
note "after the open time a probe went through; two successes closed the breaker:"
run "for i in \$(seq 3); do curl -s -H 'X-User-Id: grace' $gw/; done"

step "6. A canary ramp: rule order_ramp sends weight % of users to v2"
# share: how 20 users split now, and which of them are on v2.
share() {
	local u out v2users="" n1=0 n2=0
	printf '$ %s\n' "for u in \$(seq 20); do curl -s -H \"X-User-Id: user\$u\" $gw/; done   # counted"
	for u in $(seq 20); do
		out=$(curl -s -H "X-User-Id: user$u" "$gw/")
		case "$out" in v2*) n2=$((n2 + 1)); v2users="$v2users $u" ;; *) n1=$((n1 + 1)) ;; esac
	done
	printf '    20 users: %2d on v1, %2d on v2   v2 users:%s\n' "$n1" "$n2" "${v2users:- none}"
}
share
if [ "$have_redis" = 1 ]; then
	for w in 50 100; do
		run "$rcli HSET gray:rule:order_ramp target_version v2 fallback_version v1 weight $w"
		run "$rcli PUBLISH gateway:rules:gray order_ramp"
		wait_rule gray/order_ramp "\"weight\":\"$w\""
		share
	done
	note "a user on v2 at 50 % stays on v2 as the weight rises (a stable hash)."
	note "examples/canary-ramp/ramp.sh does the same on a schedule; roll back with weight 0:"
	run "$rcli HSET gray:rule:order_ramp target_version v2 fallback_version v1 weight 0"
	run "$rcli PUBLISH gateway:rules:gray order_ramp"
	wait_rule gray/order_ramp '"weight":"0"'
	share
else
	note "skipped: needs redis-server (HSET gray:rule:order_ramp ... weight 50, then PUBLISH gateway:rules:gray order_ramp)"
fi

step "Done: stopping Caddy, the upstreams and Redis."
