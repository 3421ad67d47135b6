#!/usr/bin/env bash
# Runs the README's test command (`make test`) N times in a row, each from a
# fresh clone of this checkout's HEAD, and prints one Markdown table row per
# run (start, end, seconds, conditions, result). With --stress, both cores are
# kept busy by `stress-ng --cpu 2` for the whole of each run (installed with
# apt-get if missing). Stops at the first failure and keeps its log.
#
#   scripts/determinism.sh [--stress] [RUNS]      (default 10 runs)
#
# The series asked for in docs/reliability.md ("Determinism") is
#   scripts/determinism.sh 10 && scripts/determinism.sh --stress 3
set -euo pipefail

stress=0
if [ "${1:-}" = "--stress" ]; then
	stress=1
	shift
fi
runs=${1:-10}
src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$src" rev-parse HEAD) # every run tests this commit, even if HEAD moves meanwhile
logdir=${DETERMINISM_LOGS:-$(mktemp -d /tmp/sluice-determinism.XXXXXX)}
mkdir -p "$logdir"

if [ "$stress" = 1 ] && ! command -v stress-ng >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null
	else
		echo "stress-ng is missing: sudo apt-get install -y stress-ng" >&2
		exit 1
	fi
fi

conditions="fresh clone of ${commit:0:7}"
[ "$stress" = 1 ] && conditions="$conditions, stress-ng --cpu 2 throughout"

echo "logs in $logdir" >&2
for i in $(seq 1 "$runs"); do
	dir="$logdir/clone-$i"
	rm -rf "$dir"
	git clone -q "$src" "$dir"
	git -C "$dir" checkout -q --detach "$commit"
	stress_pid=
	if [ "$stress" = 1 ]; then
		stress-ng --cpu 2 --quiet &
		stress_pid=$!
	fi
	start=$(date -u '+%F %H:%M:%S') # the date a run starts on, even past midnight
	t0=$(date +%s)
	result=pass
	(cd "$dir" && make test) >"$logdir/run-$i.log" 2>&1 || result=FAIL
	t1=$(date +%s)
	if [ -n "$stress_pid" ]; then
		kill "$stress_pid" 2>/dev/null || true
		wait "$stress_pid" 2>/dev/null || true
	fi
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "| $start-$(date -u +%H:%M:%S) | $i of $runs | $conditions; load average at the end $load | $result, $((t1 - t0)) s |"
	if [ "$result" = FAIL ]; then
		echo "run $i failed; log: $logdir/run-$i.log" >&2
		grep -E -- '^(--- FAIL|FAIL|panic:)' "$logdir/run-$i.log" | head -20 >&2 || true
		exit 1
	fi
	rm -rf "$dir"
done
