#!/bin/sh
# Put the canary rule into Redis through the admin API of one instance
# (it reaches every instance): v2 for 20 % of users to start with, judged
# every ANALYSIS_INTERVAL (default 10s) against v1, 10 points more per
# healthy interval up to 50 %, then promoted; rolled back after two failing
# intervals.
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
	\"step_weight\": \"10\",
	\"max_weight\": \"50\",
	\"failure_threshold\": \"2\"
}"
