#!/usr/bin/env bash
# make bench: Go micro-benchmarks (benchstat summary) and a whole-server
# comparison with wrk against plain Caddy, interleaved in one run, loopback
# only and bounded in time. Writes bench/results/report.md.
#   BENCH_COUNT   Go benchmark repetitions (default 5)
#   WRK_ROUNDS    interleaved wrk rounds (default 3)
#   WRK_SECONDS   seconds per wrk run (default 5)
#   BENCH_PARTS   "go wrk" (default), or one of them
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
count="${BENCH_COUNT:-5}" rounds="${WRK_ROUNDS:-3}" secs="${WRK_SECONDS:-5}"

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

echo "== whole server (wrk, $rounds rounds x ${secs}s per case)"
./xcaddy/build.sh >/dev/null # always this checkout's code
./scripts/ensure-redis.sh
redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
	--loglevel warning >"$out/redis.log" 2>&1 &
redis_pid=$!
export BENCH_REDIS="redis://127.0.0.1:$redis_port"
BENCH_ADMIN=2999 bin/caddy run --config bench/Caddyfile --adapter caddyfile >"$out/caddy.log" 2>&1 &
caddy_pid=$!
trap 'kill $caddy_pid $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs http://127.0.0.1:7101/ >/dev/null 2>&1 && break; sleep 0.1; done

# utime + stime of the Caddy process, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$caddy_pid/stat"; }

cases=(plain:7101 ratelimit:7102 circuitbreaker:7103 grayroute:7104 chain:7105 cluster:7108 cluster+lease:7109 proxy:7106 chain+proxy:7107)
wrk -t2 -c32 -d2s -s bench/users.lua http://127.0.0.1:7101/ >/dev/null # warm-up
: >"$out/wrk.tsv"
for round in $(seq "$rounds"); do
	# Rotate the order each round, so no case always runs first or last.
	shift_by=$(( (round - 1) % ${#cases[@]} ))
	for c in "${cases[@]:shift_by}" "${cases[@]:0:shift_by}"; do
		name="${c%%:*}" port="${c##*:}"
		cpu_before=$(cpu_ticks)
		res=$(wrk -t2 -c32 -d"${secs}s" --latency -s bench/users.lua "http://127.0.0.1:$port/" 2>&1)
		cpu_after=$(cpu_ticks)
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$res")
		p99=$(awk '$1=="99%" {print $2}' <<<"$res")
		errors=$(awk '/Non-2xx/ {print $NF}' <<<"$res")
		reqs=$(awk '/requests in/ {print $1}' <<<"$res")
		# Caddy's CPU time per request (µs): steadier than req/s when wrk
		# and Caddy share two cores.
		cpu_ns=$(( (cpu_after - cpu_before) * 1000000000 / $(getconf CLK_TCK) / reqs ))
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$rps" "$p99" "${errors:-0}" "$cpu_ns" | tee -a "$out/wrk.tsv"
	done
done

echo "== rule propagation (1,000 updates, PUBLISH to in force)"
go test -run '^$' -bench Propagation -count 1 ./rulestore 2>/dev/null | grep '^BenchmarkPropagation' | tee "$out/propagation.txt"

python3 - "$out/wrk.tsv" "$out/propagation.txt" >"$out/report.md" <<'PY'
import statistics, sys, collections
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
rps, p99, errs = collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(int)
cpu = collections.defaultdict(list)
def ms(v):
    for unit, f in (("us", 1e-3), ("ms", 1), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float("nan")
for _, name, r, p, e, c in rows:
    rps[name].append(float(r)); p99[name].append(ms(p)); errs[name] += int(e); cpu[name].append(float(c) / 1000)
base = {"plain": "plain", "ratelimit": "plain", "circuitbreaker": "plain", "grayroute": "plain",
        "chain": "plain", "cluster": "plain", "cluster+lease": "plain", "proxy": "proxy", "chain+proxy": "proxy"}
print("# Whole-server benchmark (wrk, loopback, medians of %d interleaved rounds)\n" % len(rps["plain"]))
print("| case | req/s | p99 ms | req/s ratio | Caddy CPU µs/req | CPU ratio (plain ÷ case) | non-2xx |")
print("|---|---|---|---|---|---|---|")
for name in base:
    if not rps[name]:
        continue
    m = statistics.median(rps[name])
    ratio = m / statistics.median(rps[base[name]])
    c = statistics.median(cpu[name])
    cratio = statistics.median(cpu[base[name]]) / c if c else float("nan")
    print(f"| {name} | {m:.0f} | {statistics.median(p99[name]):.2f} | {ratio:.1%} of {base[name]} | {c:.1f} | {cratio:.1%} | {errs[name]} |")
prop = open(sys.argv[2]).read().split()
if prop:
    vals = {prop[i + 1]: prop[i] for i in range(len(prop) - 1) if prop[i + 1].endswith("-µs")}
    print("\nRule propagation, PUBLISH to rule in force, 1,000 updates with 10,000 rules loaded: "
          f"p50 {vals.get('p50-µs')} µs, p99 {vals.get('p99-µs')} µs, max {vals.get('max-µs')} µs.")
PY
cat "$out/report.md"
echo "Go benchmark summary: $out/go-benchstat.txt"
