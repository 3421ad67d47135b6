#!/usr/bin/env bash
# Makes sure the commands a Debian package ships are installed:
#   scripts/ensure-package.sh <package> "<why>" <command>...
# Installs the package with apt-get when one of the commands is missing
# (as root), else says how and fails.
set -euo pipefail
pkg=$1 why=$2
shift 2
missing=0
for c in "$@"; do
	command -v "$c" >/dev/null || missing=1
done
[ "$missing" = 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "installing $pkg ($why)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
	exit 0
fi
echo "$pkg is missing. Install it, then run make test again:" >&2
echo "    sudo apt-get install -y $pkg" >&2
exit 1
