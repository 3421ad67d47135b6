#!/usr/bin/env bash
# Makes sure Debian's chromium is installed: the status page's browser test
# (rulestore/uitest) drives it headless over the DevTools protocol.
with_recommends=1 exec "$(dirname "$0")/ensure-package.sh" chromium "the status page's browser test runs it headless" chromium
