#!/usr/bin/env bash
# Makes sure prometheus and promtool are installed (Debian's package
# `prometheus` ships both in /usr/bin): the monitoring tests check
# examples/monitoring/rules.yml with `promtool test rules` and run a real
# Prometheus on a loopback port against a real Caddy. The package may
# start a system Prometheus on :9090; the tests do not use it.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing prometheus (the monitoring tests run real Prometheus)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	exit 0
fi
echo "prometheus is missing. Install it, then run make test again:" >&2
echo "    sudo apt-get install -y prometheus" >&2
exit 1
