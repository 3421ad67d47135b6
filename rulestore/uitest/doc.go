// Package uitest holds the status page's browser test (browser_test.go):
// headless Chromium against real Caddy, Redis and traffic. It is a package
// of its own because it links every Sluice module into its test binary,
// which would change what the rulestore package's own tests see (their
// rule kinds have no parsers registered).
package uitest
