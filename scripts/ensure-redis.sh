#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed: the tests start their
# own servers on free loopback ports and never use a Redis already running
# (the package may start a system Redis on 6379; the tests do not use it).
# Debian's redis-server is built with TLS and runs Sentinel too
# (`redis-server <conf> --sentinel`), which the TLS and Sentinel tests use.
with_recommends=1 exec "$(dirname "$0")/ensure-package.sh" "redis-server redis-tools" "the tests run real Redis" redis-server redis-cli
