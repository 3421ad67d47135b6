#!/usr/bin/env bash
# Makes sure hey (an HTTP load generator, Debian package `hey`) is
# installed: examples/protect-downstream's README drives its gateways with
# it, and TestProtectDownstreamREADMELoad runs that line.
exec "$(dirname "$0")/ensure-package.sh" hey "examples/protect-downstream drives load with it" hey
