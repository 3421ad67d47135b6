package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every example's Caddyfile takes its ports from the environment, with
// today's defaults ({$GATEWAY_PORT:8080}, or an address {$SLUICE_GATEWAY:
// localhost:8080}), so two examples, or an example and `make run`, can
// run side by side: no address with a port outside a {$…} placeholder.
func TestExampleCaddyfilesReadPortsFromEnvironment(t *testing.T) {
	files, err := filepath.Glob("*/Caddyfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example Caddyfiles: %v", err)
	}
	files = append(files, "Caddyfile")
	fixed := regexp.MustCompile(`(localhost|127\.0\.0\.1):\d+`)
	env := regexp.MustCompile(`\{\$[A-Z0-9_]+:[^{}]*\}`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if m := fixed.FindString(env.ReplaceAllString(line, "")); m != "" {
				t.Errorf("%s:%d: port fixed at %s, not read from the environment: %s", f, n+1, m, strings.TrimSpace(line))
			}
		}
	}
}
