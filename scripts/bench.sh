#!/usr/bin/env bash
# make bench: Go micro-benchmarks (benchstat summary) and a whole-server
# comparison with wrk against plain Caddy, loopback only and bounded in
# time. Writes bench/results/report.md. See docs/performance.md.
#   BENCH_COUNT   Go benchmark repetitions (default 6)
#   WRK_ROUNDS    rounds of every case, order rotated each round (default 5)
#   WRK_SECONDS   seconds per wrk run (default 8)
#   WRK_CONNS     wrk connections (default 64)
#   WRK_WARM      seconds of warm-up before each measured run (default 2)
#   BENCH_PARTS   "go wrk" (default), or one of them
#   BENCH_CASES   whole-server cases to run (default all; their baselines
#                 are added), e.g. "cluster cluster+lease"
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
count="${BENCH_COUNT:-6}" rounds="${WRK_ROUNDS:-5}" secs="${WRK_SECONDS:-8}" conns="${WRK_CONNS:-64}" warm="${WRK_WARM:-2}"
plain_version=v2.11.9

if ! command -v wrk >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "wrk is missing: sudo apt-get install -y wrk" >&2; exit 1; }
	apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
benchstat="$(go env GOPATH)/bin/benchstat"
[ -x "$benchstat" ] || go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

parts="${BENCH_PARTS:-go wrk}"
if [[ " $parts " == *" go "* ]]; then
	echo "== Go benchmarks (count=$count)"
	# Benchmark lines only (the store's benchmarks log every rule update: see go-stderr.log).
	go test -run '^$' -bench . -benchmem -count "$count" \
		./rulestore ./ratelimit ./circuitbreaker ./grayroute ./internal/handlerkit 2>"$out/go-stderr.log" |
		grep -E '^(Benchmark\S+\s+[0-9]+\s|goos|goarch|pkg|cpu)' | tee "$out/go.txt"
	"$benchstat" "$out/go.txt" > "$out/go-benchstat.txt"
fi
[[ " $parts " == *" wrk "* ]] || exit 0

echo "== whole server (wrk -c$conns, $rounds rounds x ${secs}s per case after ${warm}s of warm-up, one Caddy process per case)"
./xcaddy/build.sh >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; } # always this checkout's code
# Plain Caddy, the baseline: the same version without Sluice, built once.
if ! bin/caddy-plain version 2>/dev/null | grep -q "^$plain_version "; then
	OUTPUT=bin/caddy-plain go run github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5 build "$plain_version" \
		--output bin/caddy-plain >"$out/build-plain.log" 2>&1 || { cat "$out/build-plain.log" >&2; exit 1; }
fi
./scripts/ensure-redis.sh
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
	--loglevel warning >"$out/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
export BENCH_REDIS="redis://127.0.0.1:$redis_port"

plain_global='{
	admin off
	persist_config off
	log {
		level ERROR
	}
}'
# The upstream of the proxy cases: a plain Caddy of its own.
upstream_port=$(free_port)
mkdir -p "$out/cfg"
printf '%s\nhttp://127.0.0.1:%s {\n\trespond "ok"\n}\n' "$plain_global" "$upstream_port" >"$out/cfg/upstream.caddyfile"
bin/caddy-plain run --config "$out/cfg/upstream.caddyfile" --adapter caddyfile >"$out/upstream.log" 2>&1 &
pids+=($!)

chain=$'\tratelimit bench_rl\n\tcircuitbreaker bench_cb\n\tgrayroute bench_gray\n'
respond=$'\trespond "ok"\n'
proxy=$'\treverse_proxy 127.0.0.1:'"$upstream_port"$'\n'
# name, binary (plain: Caddy without Sluice), baseline case, site body
cases=(plain sluice-bare ratelimit circuitbreaker grayroute chain cluster cluster+lease proxy chain+proxy cluster+proxy)
declare -A bin base body port pid
for c in "${cases[@]}"; do bin[$c]=sluice base[$c]=plain; done
bin[plain]=plain bin[proxy]=plain base[proxy]=proxy base[chain+proxy]=proxy base[cluster+proxy]=proxy
if [ -n "${BENCH_CASES:-}" ]; then
	# The chosen cases and their baselines, in the usual order.
	declare -A want
	for c in $BENCH_CASES; do
		[ -n "${base[$c]:-}" ] || { echo "BENCH_CASES: no case $c (cases: ${cases[*]})" >&2; exit 1; }
		want[$c]=1 want[${base[$c]}]=1
	done
	chosen=()
	for c in "${cases[@]}"; do [ -n "${want[$c]:-}" ] && chosen+=("$c"); done
	cases=("${chosen[@]}")
fi
body[plain]=$respond
body[sluice-bare]=$respond
body[ratelimit]=$'\tratelimit bench_rl\n'$respond
body[circuitbreaker]=$'\tcircuitbreaker bench_cb\n'$respond
body[grayroute]=$'\tgrayroute bench_gray\n'$respond
body[chain]=$chain$respond
body[cluster]=$'\tratelimit bench_cluster\n'$respond
body[cluster+lease]=$'\tratelimit bench_lease\n'$respond
body[proxy]=$proxy
body[chain+proxy]=$chain$proxy
# Exact cluster quotas in front of a proxy: what they add to a request
# that waits on an upstream anyway (docs/performance.md, "Exact mode").
body[cluster+proxy]=$'\tratelimit bench_cluster\n'$proxy

# One Caddy process per case: each has its own heap, GC and goroutines, so
# no case pays for another's garbage, and /proc/<pid>/stat gives the CPU
# time of exactly one case.
for c in "${cases[@]}"; do
	port[$c]=$(free_port)
	cfg="$out/cfg/$c.caddyfile"
	if [ "${bin[$c]}" = plain ]; then
		printf '%s\n' "$plain_global" >"$cfg"
		exe=bin/caddy-plain
	else
		cat bench/global.caddyfile >"$cfg"
		exe=bin/caddy
	fi
	printf 'http://127.0.0.1:%s {\n%s}\n' "${port[$c]}" "${body[$c]}" >>"$cfg"
	"$exe" run --config "$cfg" --adapter caddyfile >"$out/caddy-$c.log" 2>&1 &
	pid[$c]=$!
	pids+=("${pid[$c]}")
done
for c in "${cases[@]}" upstream; do
	p=${port[$c]:-$upstream_port}
	for i in $(seq 200); do
		curl -fs "http://127.0.0.1:$p/" >/dev/null 2>&1 && break
		[ "$i" = 200 ] && { echo "case $c did not start: see $out/caddy-$c.log" >&2; exit 1; }
		sleep 0.1
	done
done

# utime + stime of a process, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
tck=$(getconf CLK_TCK)

: >"$out/wrk.tsv"
for round in $(seq "$rounds"); do
	# Rotate the order each round, so no case always runs first or last.
	shift_by=$(( (round - 1) % ${#cases[@]} ))
	for c in "${cases[@]:shift_by}" "${cases[@]:0:shift_by}"; do
		# Each case has idled while the others ran (~80 s): a short
		# warm-up first, so the run measures its steady state, not its
		# return from idle (a lease case's keys are held a minute, then
		# leased again from Redis, one blocking call per user).
		wrk -t2 -c"$conns" -d"$warm"s -s bench/users.lua "http://127.0.0.1:${port[$c]}/" >/dev/null
		caddy0=$(cpu_ticks "${pid[$c]}") redis0=$(cpu_ticks "$redis_pid")
		res=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s bench/users.lua "http://127.0.0.1:${port[$c]}/" 2>&1)
		caddy1=$(cpu_ticks "${pid[$c]}") redis1=$(cpu_ticks "$redis_pid")
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$res")
		p99=$(awk '$1=="99%" {print $2}' <<<"$res")
		errors=$(awk '/Non-2xx/ {print $NF}' <<<"$res")
		reqs=$(awk '/requests in/ {print $1}' <<<"$res")
		# CPU time per request (ns) of the case's Caddy, and of Redis
		# (non-zero for the cluster cases only).
		caddy_ns=$(( (caddy1 - caddy0) * 1000000000 / tck / reqs ))
		redis_ns=$(( (redis1 - redis0) * 1000000000 / tck / reqs ))
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$c" "$rps" "$p99" "${errors:-0}" \
			"$caddy_ns" "$redis_ns" "$(rss_kb "${pid[$c]}")" | tee -a "$out/wrk.tsv"
	done
done

echo "== rule propagation (1,000 updates, PUBLISH to in force)"
go test -run '^$' -bench Propagation -count 1 ./rulestore 2>/dev/null | grep '^BenchmarkPropagation' | tee "$out/propagation.txt"

bases=""
for c in "${cases[@]}"; do bases+="$c=${base[$c]} "; done
python3 - "$out/wrk.tsv" "$out/propagation.txt" "$bases" "$conns" "$secs" "$plain_version" >"$out/report.md" <<'PY'
import statistics, sys, collections
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
base = dict(kv.split("=") for kv in sys.argv[3].split())
conns, secs, plain_version = sys.argv[4], sys.argv[5], sys.argv[6]
def ms(v):
    for unit, f in (("us", 1e-3), ("ms", 1), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float("nan")
run = {}  # (round, case) -> measures
for rnd, name, r, p, e, c, rc, rss in rows:
    run[(rnd, name)] = dict(rps=float(r), p99=ms(p), errs=int(e), cpu=float(c) / 1000, rcpu=float(rc) / 1000, rss=int(rss) / 1024)
rounds = sorted({k[0] for k in run}, key=int)
def per_round(name, f):
    return [f(run[(r, name)], run[(r, base[name])]) for r in rounds if (r, name) in run and (r, base[name]) in run]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
def spread(xs, fmt):
    return f"{fmt(min(xs))}–{fmt(max(xs))}" if xs else "—"
r2 = lambda x: f"{x:.2f}"
print(f"# Whole-server benchmark ({len(rounds)} rounds, order rotated each round, one Caddy process per case,")
print(f"# wrk -t2 -c{conns} -d{secs}s, 10,000 random X-User-Id values; plain = Caddy {plain_version} without Sluice)\n")
print("Ratios are taken within each round (case ÷ its baseline in the same round), then the median and the")
print("min–max over the rounds are shown. CPU is the case's Caddy process (utime + stime) per request.\n")
print("| case | req/s (median) | req/s ratio | ratio min–max | p99 ms | p99 ratio | Caddy CPU µs/req | CPU ratio | CPU ratio min–max | Redis CPU µs/req | RSS MB | non-2xx |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for name in base:
    ms_ = [run[(r, name)] for r in rounds if (r, name) in run]
    if not ms_:
        continue
    rr = per_round(name, lambda a, b: a["rps"] / b["rps"])
    pr = per_round(name, lambda a, b: a["p99"] / b["p99"])
    cr = per_round(name, lambda a, b: a["cpu"] / b["cpu"] if b["cpu"] else float("nan"))
    # Redis CPU only means something for the cases that call Redis; the
    # others would show Redis's idle background work.
    rcpu = f"{med([m['rcpu'] for m in ms_]):.1f}" if name.startswith("cluster") else "—"
    print(f"| {name} | {med([m['rps'] for m in ms_]):.0f} | {med(rr):.2f} of {base[name]} | {spread(rr, r2)} "
          f"| {med([m['p99'] for m in ms_]):.2f} | {med(pr):.2f} | {med([m['cpu'] for m in ms_]):.1f} "
          f"| {med(cr):.2f} | {spread(cr, r2)} | {rcpu} | {max(m['rss'] for m in ms_):.0f} "
          f"| {sum(m['errs'] for m in ms_)} |")
for name in ("cluster", "cluster+lease", "cluster+proxy"):
    ms_ = [run[(r, name)] for r in rounds if (r, name) in run]
    rc = med([m["rcpu"] for m in ms_]) if ms_ else 0
    if rc > 0:
        print(f"\n{name}: {1e6 / rc:,.0f} decisions per Redis CPU-second (Redis {rc:.1f} µs CPU per request).")
prop = open(sys.argv[2]).read().split()
if prop:
    vals = {prop[i + 1]: prop[i] for i in range(len(prop) - 1) if prop[i + 1].endswith("-µs")}
    print("\nRule propagation, PUBLISH to rule in force, 1,000 updates with 10,000 rules loaded: "
          f"p50 {vals.get('p50-µs')} µs, p99 {vals.get('p99-µs')} µs, max {vals.get('max-µs')} µs.")
PY
cat "$out/report.md"
[[ " $parts " == *" go "* ]] && echo "Go benchmark summary: $out/go-benchstat.txt"
exit 0
