#!/usr/bin/env bash
# Makes sure prometheus and promtool are installed (Debian's package
# `prometheus` ships both in /usr/bin): the monitoring tests check
# examples/monitoring/rules.yml with `promtool test rules` and run a real
# Prometheus on a loopback port against a real Caddy. The package may
# start a system Prometheus on :9090; the tests do not use it.
exec "$(dirname "$0")/ensure-package.sh" prometheus "the monitoring tests run real Prometheus" prometheus promtool
