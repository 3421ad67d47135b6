#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed: the tests start their
# own servers on free loopback ports and never use a Redis already running.
# Debian's redis-server is built with TLS and runs Sentinel too
# (`redis-server <conf> --sentinel`), which the TLS and Sentinel tests use.
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing redis-server (the tests run real Redis)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq redis-server redis-tools >/dev/null
	# The package may start a system Redis on 6379; the tests do not use it.
	exit 0
fi
echo "redis-server is missing. Install it, then run make test again:" >&2
echo "    sudo apt-get install -y redis-server" >&2
exit 1
