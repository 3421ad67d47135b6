#!/usr/bin/env bash
# make bench: Go micro-benchmarks (benchstat summary) and a whole-server
# comparison with wrk against plain Caddy, loopback only and bounded in
# time. Writes bench/results/report.md. See docs/performance.md.
#   BENCH_COUNT   Go benchmark repetitions (default 6)
#   WRK_ROUNDS    rounds of every case, order rotated each round (default 5)
#   WRK_SLICE     seconds per wrk run (default 1); a case and its baseline
#                 run in alternating slices, base case case base (ABBA)
#   WRK_PAIRS     slices of each per round (default 4: 4 s of each)
#   WRK_CONNS     wrk connections (default 64)
#   WRK_WARM      seconds of warm-up of the case and of its baseline before
#                 their slices (default 1; 0: none)
#   BENCH_KEYS    distinct X-User-Id values wrk sends (default 10000; 1: one key)
#   BENCH_QUIET   the quiet gate: before each case's run, wait until the box's
#                 CPU outside our processes is below this share (default 0.10)
#   BENCH_QUIET_WAIT  seconds to wait for quiet before measuring anyway, the
#                 run then marked busy in the report (default 30)
#   BENCH_BUILD   0 measures the binaries already in bin/ (iterating only)
#   BENCH_OUT     where results go (default bench/results)
#   WRK_SCRIPT    wrk's Lua script (default bench/users.lua)
#   BENCH_PROPAGATION  0 skips the rule propagation benchmark
#   BENCH_PARTS   "go wrk" (default), or one of them
#   BENCH_CASES   whole-server cases to run (default all; their baselines
#                 are added), e.g. "cluster cluster+lease"
set -euo pipefail
cd "$(dirname "$0")/.."
out="${BENCH_OUT:-bench/results}"
wrk_script="${WRK_SCRIPT:-bench/users.lua}"
mkdir -p "$out"
count="${BENCH_COUNT:-6}" rounds="${WRK_ROUNDS:-5}" slice="${WRK_SLICE:-1}" pairs="${WRK_PAIRS:-4}" conns="${WRK_CONNS:-64}" warm="${WRK_WARM:-1}"
plain_version=v2.11.9
keys="${BENCH_KEYS:-10000}" quiet_max="${BENCH_QUIET:-0.10}" quiet_wait="${BENCH_QUIET_WAIT:-30}"
export BENCH_KEYS="$keys"

if ! command -v wrk >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "wrk is missing: sudo apt-get install -y wrk" >&2; exit 1; }
	apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
benchstat="$(go env GOPATH)/bin/benchstat"
[ -x "$benchstat" ] || go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

parts="${BENCH_PARTS:-go wrk}"
rm -f "$out/recording.txt" # written by the go part, reported with the whole server's
if [[ " $parts " == *" go "* ]]; then
	echo "== Go benchmarks (count=$count)"
	# Benchmark lines only (the store's benchmarks log every rule update: see go-stderr.log).
	go test -run '^$' -bench . -benchmem -count "$count" \
		./rulestore ./ratelimit ./circuitbreaker ./grayroute ./internal/handlerkit 2>"$out/go-stderr.log" |
		grep -E '^(Benchmark\S+\s+[0-9]+\s|goos|goarch|pkg|cpu)' | tee "$out/go.txt"
	"$benchstat" "$out/go.txt" > "$out/go-benchstat.txt"
	echo "== the recording for previews, per request (BenchmarkRecordStep; goal: at most 50 CPU ns, no allocation)"
	awk '/^BenchmarkRecordStep/ { for (i = 3; i < NF; i++) { if ($(i+1) == "cpu-ns/op") c[$1] = c[$1] " " $i; if ($(i+1) == "allocs/op") a[$1] = $i } }
		END { for (k in c) printf "%s: cpu-ns/op%s; allocs/op %s\n", k, c[k], a[k] }' "$out/go.txt" | sort | tee "$out/recording.txt"
fi
[[ " $parts " == *" wrk "* ]] || exit 0

echo "== whole server (wrk -t2 -c$conns, $rounds rounds; per case $pairs slices of ${slice}s alternating with its baseline (ABBA) after ${warm}s of warm-up of each; $keys keys; one Caddy process per case)"
# Every binary is built now, by the same script with the same Go and flags
# (xcaddy/build.sh): a baseline built earlier by another Go or with other
# flags would move every ratio.
if [ "${BENCH_BUILD:-1}" = 0 ]; then
	echo "BENCH_BUILD=0: measuring the binaries in bin/ as they are" >&2
else
	./xcaddy/build.sh >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; } # always this checkout's code
	PLAIN=1 OUTPUT=bin/caddy-plain ./xcaddy/build.sh >"$out/build-plain.log" 2>&1 || { cat "$out/build-plain.log" >&2; exit 1; }
fi
bin/caddy-plain version | grep -q "^$plain_version " || { echo "bin/caddy-plain is not Caddy $plain_version" >&2; exit 1; }
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
upstream_pid=$!
pids+=("$upstream_pid")

chain=$'\tratelimit bench_rl\n\tcircuitbreaker bench_cb\n\tgrayroute bench_gray\n'
respond=$'\trespond "ok"\n'
proxy=$'\treverse_proxy 127.0.0.1:'"$upstream_port"$'\n'
# name, binary (plain: Caddy without Sluice; floor: Sluice whose exact token
# bucket script does nothing, script_floor.go), baseline case, site body
cases=(plain sluice-bare ratelimit ratelimit-noheaders circuitbreaker grayroute chain cluster floor cluster+lease proxy chain+proxy cluster+proxy)
declare -A bin base body port pid
for c in "${cases[@]}"; do bin[$c]=sluice base[$c]=plain; done
bin[plain]=plain bin[proxy]=plain bin[floor]=floor base[proxy]=proxy base[chain+proxy]=proxy base[cluster+proxy]=proxy
if [ -n "${BENCH_CASES:-}" ]; then
	# The chosen cases and their baselines, in the usual order.
	declare -A want
	for c in $BENCH_CASES; do
		[ -n "${base[$c]:-}" ] || { echo "BENCH_CASES: no case $c (cases: ${cases[*]})" >&2; exit 1; }
		want[$c]=1 want[${base[$c]}]=1
		[ "$c" = cluster ] && want[floor]=1 # the exact case is read against its floor
	done
	chosen=()
	for c in "${cases[@]}"; do [ -n "${want[$c]:-}" ] && chosen+=("$c"); done
	cases=("${chosen[@]}")
fi
if [[ " ${cases[*]} " == *" floor "* && "${BENCH_BUILD:-1}" != 0 ]]; then
	SLUICE_TAGS=sluice_floor OUTPUT=bin/caddy-floor ./xcaddy/build.sh >"$out/build-floor.log" 2>&1 ||
		{ cat "$out/build-floor.log" >&2; exit 1; }
fi
body[plain]=$respond
body[sluice-bare]=$respond
body[ratelimit]=$'\tratelimit bench_rl\n'$respond
body[ratelimit-noheaders]=$'\tratelimit bench_rl_nohdr\n'$respond
body[circuitbreaker]=$'\tcircuitbreaker bench_cb\n'$respond
body[grayroute]=$'\tgrayroute bench_gray\n'$respond
body[chain]=$chain$respond
body[cluster]=$'\tratelimit bench_cluster\n'$respond
body[floor]=${body[cluster]}
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
	else
		cat bench/global.caddyfile >"$cfg"
	fi
	exe=bin/caddy
	[ "${bin[$c]}" = sluice ] || exe=bin/caddy-${bin[$c]}
	printf 'http://127.0.0.1:%s {\n%s}\n' "${port[$c]}" "${body[$c]}" >>"$cfg"
	# gctrace: one line per GC cycle on stderr, so the report can say how
	# much of a case's CPU is the collector's (the heap a binary keeps
	# alive sets how often it collects).
	GODEBUG=gctrace=1 "$exe" run --config "$cfg" --adapter caddyfile >"$out/caddy-$c.log" 2>&1 &
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
# ours: CPU ticks of our processes (Caddys, Redis) and of this script's
# finished children (wrk), into the variable ours; `times` runs in this
# shell, as a subshell would not count the wrk runs.
ours_ticks() {
	local n=0 p
	for p in "${pids[@]}"; do n=$((n + $(cpu_ticks "$p"))); done
	times >"$out/.times"
	ours=$((n + $(awk -v t="$tck" 'NR == 2 {
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += (a[1] * 60 + a[2]) * t }
		printf "%d\n", n }' "$out/.times")))
}
# busy and total ticks of the whole box (all CPUs), from /proc/stat
box_ticks() { awk '/^cpu / {b = $2 + $3 + $4 + $7 + $8 + $9; print b, b + $5 + $6}' /proc/stat; }
# share of the box's CPU outside our processes, from busy, total and ours deltas
other_share() { awk -v b=$(($1 - $3)) -v t="$2" 'BEGIN {printf "%.3f", (b < 0 ? 0 : b) / (t ? t : 1)}'; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
tck=$(getconf CLK_TCK)

# The quiet gate: wait until the box's CPU outside our processes, over one
# second, is below quiet_max of the box, or quiet_wait seconds have passed.
# Leaves the share seen last in gate; the run is marked busy when it is above.
quiet() {
	local deadline=$((SECONDS + quiet_wait)) b0 t0 b1 t1 o0
	while :; do
		read -r b0 t0 < <(box_ticks)
		ours_ticks
		o0=$ours
		sleep 1
		read -r b1 t1 < <(box_ticks)
		ours_ticks
		gate=$(other_share $((b1 - b0)) $((t1 - t0)) $((ours - o0)))
		if awk -v s="$gate" -v m="$quiet_max" 'BEGIN {exit !(s <= m)}' || [ "$SECONDS" -ge "$deadline" ]; then
			return
		fi
	done
}

# GC cycles of case $1 so far and the CPU milliseconds they took (the sum
# of a gctrace line's "ms cpu" parts: assist, background and idle workers).
gc_so_far() {
	awk '/^gc [0-9]+ @/ { n++; for (i = 1; i <= NF; i++) if ($i == "cpu," && $(i - 1) == "ms") {
		k = split($(i - 2), a, /[+\/]/); for (j = 1; j <= k; j++) ms += a[j] } }
		END { printf "%d %.3f\n", n, ms }' "$out/caddy-$1.log"
}
# One wrk run of slice seconds against case $1, added to its sums: requests,
# seconds, errors, CPU ticks of its Caddy and of Redis, its GC cycles and
# their CPU; its p99 appended.
declare -A n_req n_sec n_err n_cpu n_rcpu n_gc n_gcms p99s
slice_run() {
	local c=$1 c0 r0 g0 gm0 g1 gm1 res
	c0=$(cpu_ticks "${pid[$c]}") r0=$(cpu_ticks "$redis_pid")
	read -r g0 gm0 < <(gc_so_far "$c")
	res=$(wrk -t2 -c"$conns" -d"${slice}s" --latency -s "$wrk_script" "http://127.0.0.1:${port[$c]}/" 2>&1)
	n_cpu[$c]=$(( ${n_cpu[$c]:-0} + $(cpu_ticks "${pid[$c]}") - c0 ))
	n_rcpu[$c]=$(( ${n_rcpu[$c]:-0} + $(cpu_ticks "$redis_pid") - r0 ))
	read -r g1 gm1 < <(gc_so_far "$c")
	n_gc[$c]=$(( ${n_gc[$c]:-0} + g1 - g0 ))
	n_gcms[$c]=$(awk -v a="${n_gcms[$c]:-0}" -v b="$gm0" -v e="$gm1" 'BEGIN {print a + e - b}')
	read -r reqs dur < <(awk '/requests in/ {sub(/s,?$/, "", $4); print $1, $4}' <<<"$res")
	n_req[$c]=$(( ${n_req[$c]:-0} + reqs ))
	n_sec[$c]=$(awk -v a="${n_sec[$c]:-0}" -v b="$dur" 'BEGIN {print a + b}')
	n_err[$c]=$(( ${n_err[$c]:-0} + $(awk '/Non-2xx/ {n = $NF} END {print n + 0}' <<<"$res") ))
	p99s[$c]+="$(awk '$1=="99%" {print $2}' <<<"$res") "
}
# The sums of case $1 as: req/s, its slices' p99s (comma-separated), errors,
# Caddy and Redis CPU ns per request, GC cycles per 1,000 requests and GC
# CPU ns per request.
sums() {
	local c=$1 p=${p99s[$1]% }
	awk -v r="${n_req[$c]}" -v s="${n_sec[$c]}" -v e="${n_err[$c]}" -v cp="${n_cpu[$c]}" -v rc="${n_rcpu[$c]}" \
		-v g="${n_gc[$c]}" -v gm="${n_gcms[$c]}" -v t="$tck" -v p="${p// /,}" 'BEGIN {
		printf "%.2f\t%s\t%d\t%d\t%d\t%.3f\t%d", r / s, p, e, cp * 1e9 / t / r, rc * 1e9 / t / r, g * 1000 / r, gm * 1e6 / r }'
}

# Each case is measured against its baseline in the same minute, in slices
# that alternate base, case, case, base (ABBA), pairs times: a 2-core box's
# speed drifts by 10-30 % between minutes (the same binary read 25,000 to
# 42,000 req/s across one run), which a baseline measured once per round,
# minutes away, turns into the ratio's noise; ABBA cancels a linear drift
# within the block.
: >"$out/wrk.tsv"
measured=()
for c in "${cases[@]}"; do [ "$c" = "${base[$c]}" ] || measured+=("$c"); done
for round in $(seq "$rounds"); do
	# Rotate the order each round, so no case always runs first or last.
	shift_by=$(( (round - 1) % ${#measured[@]} ))
	for c in "${measured[@]:shift_by}" "${measured[@]:0:shift_by}"; do
		b=${base[$c]}
		quiet
		# Both have idled while the others ran: a short warm-up first, so
		# the slices measure their steady state, not a return from idle
		# (a lease case's keys are held a minute, then leased again from
		# Redis, one blocking call per user).
		if [ "$warm" != 0 ]; then
			for w in "$b" "$c"; do wrk -t2 -c"$conns" -d"$warm"s -s "$wrk_script" "http://127.0.0.1:${port[$w]}/" >/dev/null; done
		fi
		for w in "$b" "$c"; do unset "n_req[$w]" "n_sec[$w]" "n_err[$w]" "n_cpu[$w]" "n_rcpu[$w]" "n_gc[$w]" "n_gcms[$w]" "p99s[$w]"; done
		read -r box0 tot0 < <(box_ticks)
		ours_ticks
		ours0=$ours
		for k in $(seq "$pairs"); do
			if [ $((k % 2)) = 1 ]; then slice_run "$b"; slice_run "$c"; else slice_run "$c"; slice_run "$b"; fi
		done
		read -r box1 tot1 < <(box_ticks)
		ours_ticks
		# The box's CPU spent outside our processes during the block.
		other=$(other_share $((box1 - box0)) $((tot1 - tot0)) $((ours - ours0)))
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$c" "$(sums "$c")" "$(rss_kb "${pid[$c]}")" \
			"$gate" "$other" "$b" "$(sums "$b")" | tee -a "$out/wrk.tsv"
	done
done

: >"$out/propagation.txt"
[ "${BENCH_PROPAGATION:-1}" = 0 ] || {
echo "== rule propagation (1,000 updates, PUBLISH to in force)"
go test -run '^$' -bench Propagation -count 1 ./rulestore 2>/dev/null | grep '^BenchmarkPropagation' | tee "$out/propagation.txt"
}

python3 - "$out/wrk.tsv" "$out/propagation.txt" "$conns" "$slice" "$pairs" "$plain_version" "$warm" "$keys" "$quiet_max" >"$out/report.md" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
conns, slice_, pairs, plain_version, warm, keys, quiet_max = sys.argv[3:10]
def ms(v):
    for unit, f in (("us", 1e-3), ("ms", 1), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[: -len(unit)]) * f
    return float("nan")
def measures(r, p, e, c, rc, g, gm):
    return dict(rps=float(r), p99=statistics.median(ms(v) for v in p.split(",")), errs=int(e),
                cpu=float(c) / 1000, rcpu=float(rc) / 1000, gc=float(g), gcpu=float(gm) / 1000)
run, base, names = {}, {}, []  # run[(round, case)] = (its measures, its baseline's measures in the same block)
for row in rows:
    rnd, name, case_, (rss, gate, other, bname), base_ = row[0], row[1], row[2:9], row[9:13], row[13:20]
    m = measures(*case_)
    m.update(rss=int(rss) / 1024, gate=float(gate), other=float(other))
    run[(rnd, name)] = (m, measures(*base_))
    base[name] = bname
    if name not in names:
        names.append(name)
rounds = sorted({k[0] for k in run}, key=int)
def paired(name, f):
    return [f(*run[(r, name)]) for r in rounds if (r, name) in run]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
def spread(xs):
    return f"{min(xs):.2f}–{max(xs):.2f}" if xs else "—"
rps = lambda a, b: a["rps"] / b["rps"]
p99 = lambda a, b: a["p99"] / b["p99"]
cpu = lambda a, b: a["cpu"] / b["cpu"] if b["cpu"] else float("nan")
# Goals of issue 33: req/s ratio at least, CPU/req ratio at most.
goals = {"ratelimit": (0.97, 1.05), "ratelimit-noheaders": (0.97, 1.05), "circuitbreaker": (0.97, 1.05),
         "grayroute": (0.97, 1.05), "chain": (0.93, None), "cluster+lease": (0.93, None)}
labels = {"ratelimit": "ratelimit (headers on)", "ratelimit-noheaders": "ratelimit (headers off)",
          "chain": "full chain", "cluster": "cluster, exact (batched)",
          "floor": "floor: exact, no-op script", "cluster+lease": "cluster, `lease_size 1000`",
          "chain+proxy": "chain + reverse_proxy (÷ proxy)", "cluster+proxy": "cluster, exact + reverse_proxy (÷ proxy)"}
print(f"Whole server: {len(rounds)} rounds, order rotated each round, one Caddy process per case. Each case "
      f"is measured against its baseline in one block: {warm} s warm-up of each, then {pairs} slices of "
      f"{slice_} s of each alternating base, case, case, base (ABBA), after a quiet gate (other CPU ≤ "
      f"{float(quiet_max):.0%} of the box); `wrk -t2 -c{conns}`, {int(keys):,} pre-built requests with distinct "
      f"`X-User-Id`, `respond \"ok\"` sites, rules that never reject; plain = Caddy {plain_version} without Sluice, "
      "built by xcaddy/build.sh with the same Go and flags. Ratios are case ÷ its baseline within a block "
      "(req/s and CPU over the block's slices, p99 the median of the slices' p99s): median and min–max over "
      "the rounds.\n")
pl = [b for (r, n), (m, b) in run.items() if base[n] == "plain"]
if pl:
    print(f"Plain Caddy: {med([m['rps'] for m in pl]):,.0f} req/s (median of its {len(pl)} blocks), "
          f"{med([m['cpu'] for m in pl]):.1f} µs of CPU per request, p99 {med([m['p99'] for m in pl]):.2f} ms.\n")
print("| case | req/s ÷ base | min–max | p99 ÷ base | min–max | CPU/req ÷ base | min–max | Caddy CPU µs/req | Redis CPU µs/req | RSS MB | non-2xx | goal |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for name in names:
    ms_ = [run[(r, name)][0] for r in rounds if (r, name) in run]
    rr, pr, cr = paired(name, rps), paired(name, p99), paired(name, cpu)
    # Redis CPU only means something for the cases that call Redis; the
    # others would show Redis's idle background work.
    rcpu = f"{med([m['rcpu'] for m in ms_]):.1f}" if name.startswith("cluster") or name == "floor" else "—"
    goal = ""
    if name in goals:
        lo, hi = goals[name]
        ok = med(rr) >= lo and (hi is None or med(cr) <= hi)
        goal = ("met" if ok else "**not met**") + f" (≥ {lo}" + (f", CPU ≤ {hi}×)" if hi else ")")
    print(f"| {labels.get(name, name)} | **{med(rr):.2f}** | {spread(rr)} | {med(pr):.2f} | {spread(pr)} "
          f"| {med(cr):.2f} | {spread(cr)} | {med([m['cpu'] for m in ms_]):.1f} | {rcpu} "
          f"| {max(m['rss'] for m in ms_):.0f} | {sum(m['errs'] for m in ms_)} | {goal} |")
# The collector's share: how often each binary collects and what that
# costs per request, beside the CPU ratio with the GC's CPU left out of
# both sides (a binary that keeps a larger heap alive collects less often).
print("\nGarbage collection (from `GODEBUG=gctrace=1`; GC CPU as the runtime reports it: assist, "
      "background and idle workers, stop-the-world phases × GOMAXPROCS):\n")
print("| case | GC cycles per 1,000 req, case / base | GC CPU µs/req, case / base | CPU/req ÷ base, GC left out | min–max |")
print("|---|---|---|---|---|")
nogc = lambda a, b: (a["cpu"] - a["gcpu"]) / (b["cpu"] - b["gcpu"]) if b["cpu"] > b["gcpu"] else float("nan")
for name in names:
    pairs_ = [run[(r, name)] for r in rounds if (r, name) in run]
    ng = paired(name, nogc)
    print(f"| {labels.get(name, name)} | {med([m['gc'] for m, _ in pairs_]):.2f} / {med([b['gc'] for _, b in pairs_]):.2f} "
          f"| {med([m['gcpu'] for m, _ in pairs_]):.1f} / {med([b['gcpu'] for _, b in pairs_]):.1f} "
          f"| {med(ng):.2f} | {spread(ng)} |")
# The exact case against its floor: both are read against plain in their
# own blocks, so the floor ratio is their ratios' ratio, round by round.
fl = [run[(r, "cluster")][0]["rps"] / run[(r, "cluster")][1]["rps"] / (run[(r, "floor")][0]["rps"] / run[(r, "floor")][1]["rps"])
      for r in rounds if (r, "cluster") in run and (r, "floor") in run]
if fl:
    fp = paired("floor", rps)
    print(f"\nExact cluster mode against the box's floor (the same binary whose exact script does nothing, "
          f"each against plain in the same round): **{med(fl):.2f} of the floor** ({spread(fl)}); the floor itself "
          f"{med(fp):.2f} of plain ({spread(fp)}).")
for name in ("cluster", "cluster+lease", "cluster+proxy"):
    ms_ = [run[(r, name)][0] for r in rounds if (r, name) in run]
    rc = med([m["rcpu"] for m in ms_]) if ms_ else 0
    if rc > 0:
        print(f"\n{name}: {1e6 / rc:,.0f} decisions per Redis CPU-second (Redis {rc:.1f} µs CPU per request).")
allm = [m for m, _ in run.values()]
busy = [m for m in allm if m["gate"] > float(quiet_max)]
print(f"\nQuiet gate: {len(allm) - len(busy)} of {len(allm)} blocks started on a quiet box"
      + (f"; **{len(busy)} started busy** (the gate timed out)" if busy else "")
      + f". CPU outside the benchmark's processes during the blocks: median {med([m['other'] for m in allm]):.1%} "
      f"of the box, max {max(m['other'] for m in allm):.1%}.")
prop = open(sys.argv[2]).read().split()
if prop:
    vals = {prop[i + 1]: prop[i] for i in range(len(prop) - 1) if prop[i + 1].endswith("-µs")}
    print("\nRule propagation, PUBLISH to rule in force, 1,000 updates with 10,000 rules loaded: "
          f"p50 {vals.get('p50-µs')} µs, p99 {vals.get('p99-µs')} µs, max {vals.get('max-µs')} µs.")
PY
if [ -s "$out/recording.txt" ]; then
	{ echo; echo "The recording for previews, per request (BenchmarkRecordStep, 10,000 keys; every sample):"; sed 's/^/- /' "$out/recording.txt"; } >>"$out/report.md"
fi
cat "$out/report.md"
[[ " $parts " == *" go "* ]] && echo "Go benchmark summary: $out/go-benchstat.txt"
exit 0
