#!/bin/sh
# Put the canary rule into Redis through the admin API of one instance
# (it reaches every instance): v2 for 20 % of users to start with, judged
# every ANALYSIS_INTERVAL (default 10s) against v1, 10 points more per
# healthy interval up to 50 %, then promoted; rolled back after two failing
# intervals. v2 may be 20 % or MIN_LATENCY_DELTA (default 20ms) slower than
# v1, whichever is more: on loopback a request takes a millisecond, and on a
# busy machine the scheduler adds tens of milliseconds to the tail of the
# less busy version alone. LATENCY_PERCENTILE (default 99) is the
# percentile compared.
#
#   ADMIN=localhost:2019 examples/canary-analysis/rules.sh
set -eu
curl -fsS -X PUT "http://${ADMIN:-localhost:2019}/sluice/rules/gray/checkout_canary" \
	-H 'Content-Type: application/json' -d "{
	\"target_version\": \"v2\",
	\"fallback_version\": \"v1\",
	\"hash_key\": \"userId\",
	\"weight\": \"20\",
	\"analysis\": \"on\",
	\"analysis_interval\": \"${ANALYSIS_INTERVAL:-10s}\",
	\"min_samples\": \"200\",
	\"min_latency_delta\": \"${MIN_LATENCY_DELTA:-20ms}\",
	\"latency_percentile\": \"${LATENCY_PERCENTILE:-99}\",
	\"step_weight\": \"10\",
	\"max_weight\": \"50\",
	\"failure_threshold\": \"2\"
}"
