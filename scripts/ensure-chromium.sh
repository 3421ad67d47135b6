#!/usr/bin/env bash
# Makes sure Debian's chromium is installed: the status page's browser test
# (rulestore/uitest) drives it headless over the DevTools protocol.
set -euo pipefail
if command -v chromium >/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing chromium (the status page's browser test runs it headless)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq chromium >/dev/null
	exit 0
fi
echo "chromium is missing. Install it, then run make test again:" >&2
echo "    sudo apt-get install -y chromium" >&2
exit 1
