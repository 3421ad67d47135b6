#!/bin/sh
# Start the two versions of the example: v1 healthy on 127.0.0.1:9001, v2
# failing 10 % of its requests on 127.0.0.1:9002 (examples/upstream), or
# as told: a fail rate and a latency added to each of v2's answers. Both
# stop with this script (Ctrl-C). `curl 127.0.0.1:9002/hits` counts the
# requests v2 has answered.
#
#   examples/canary-analysis/upstreams.sh [v2-fail-rate [v2-latency]]   default 0.1 0s
#   examples/canary-analysis/upstreams.sh 0          # v2 as good as v1
#   examples/canary-analysis/upstreams.sh 0 80ms     # v2 80 ms slower
#
# V1_ARGS and V2_ARGS add flags of examples/upstream, e.g. a service time
# on /work, 50 % longer on v2 (send the traffic to /work):
#   V1_ARGS='-work 10ms -work-cv 0.5 -capacity 100' \
#   V2_ARGS='-work 15ms -work-cv 0.5 -capacity 100' examples/canary-analysis/upstreams.sh 0
set -eu
cd "$(dirname "$0")/.."
rate=${1:-0.1}
latency=${2:-0s}
dir=$(mktemp -d)
bin=$dir/upstream
go build -o "$bin" ./upstream
"$bin" -addr "${V1_ADDR:-127.0.0.1:9001}" -version v1 ${V1_ARGS:-} &
v1=$!
"$bin" -addr "${V2_ADDR:-127.0.0.1:9002}" -version v2 -fail-rate "$rate" -latency "$latency" ${V2_ARGS:-} &
v2=$!
trap 'kill $v1 $v2 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
wait
