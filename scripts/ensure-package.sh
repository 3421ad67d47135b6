#!/usr/bin/env bash
# Makes sure the commands Debian packages ship are installed:
#   scripts/ensure-package.sh "<package>..." "<why>" <command>...
# Installs the packages with apt-get when one of the commands is missing
# (as root), else says how and fails. with_recommends=1 in the environment
# installs what they recommend too (chromium's fonts, redis-tools' own).
#
# Two `make test` started side by side on a fresh machine both find the
# package missing; apt-get takes its locks without waiting, so the second
# failed ("Could not get lock /var/lib/apt/lists/lock"). Installs are
# therefore one at a time (flock), the commands are looked for again once
# the lock is held (the other run may have installed them meanwhile), and
# apt-get waits for locks held by anything else (unattended upgrades).
set -euo pipefail
pkgs=$1 why=$2
shift 2
have_all() {
	for c in "$@"; do
		command -v "$c" >/dev/null || return 1
	done
}
have_all "$@" && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	exec 9>/var/lock/sluice-ensure-package.lock
	flock -w 900 9
	have_all "$@" && exit 0
	echo "installing $pkgs ($why)..."
	export DEBIAN_FRONTEND=noninteractive
	wait_locks=(-o DPkg::Lock::Timeout=600)
	recommends=--no-install-recommends
	[ "${with_recommends:-0}" = 1 ] && recommends=
	# shellcheck disable=SC2086 # pkgs is a list, recommends may be empty
	apt-get "${wait_locks[@]}" update -qq &&
		apt-get "${wait_locks[@]}" install -y -qq $recommends $pkgs >/dev/null
	have_all "$@" && exit 0
	echo "installed $pkgs, but one of these is still missing: $*" >&2
	exit 1
fi
echo "$pkgs missing. Install it, then run make test again:" >&2
echo "    sudo apt-get install -y $pkgs" >&2
exit 1
