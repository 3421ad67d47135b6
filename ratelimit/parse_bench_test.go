package ratelimit

import (
	"testing"

	"github.com/sluicegw/sluice/rulestore"
)

// BenchmarkParseRule parses a rule with a dozen fields, as a bulk change
// from Redis does per rule.
func BenchmarkParseRule(b *testing.B) {
	f := rulestore.Fields{"qps": "100", "burst": "200", "key_resolver": "userId", "max_concurrent": "10",
		"status": "429", "headers": "true", "shadow": "false", "max_keys": "50000", "scope": "cluster",
		"redis_timeout": "50ms", "on_redis_error": "deny 503", "control_behavior": "reject", "body": "{}"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRule("r", f); err != nil {
			b.Fatal(err)
		}
	}
}
