package caddyfile_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// globalRules declares one rule of each kind; danglingCases name a typo of
// one of them from every place a rule can be named.
const globalRules = `
		rate_limit order_api {
			qps 10
		}
		circuit_breaker order_cb {
			failure_threshold 3
		}
		gray product_canary {
			match_tag X-Canary
			target_version v2
		}
		binding order_route {
			rate_limit order_api
		}`

var danglingCases = []struct {
	name           string
	global, site   string
	line, id, hint string
}{
	{"binding rate_limit", `
		binding r {
			rate_limit order_apj
		}`, "respond ok", "Caddyfile:17", `"order_apj"`, "did you mean order_api?"},
	{"binding circuit_breaker", `
		binding r {
			circuit_breaker order_bc
		}`, "respond ok", "Caddyfile:17", `"order_bc"`, "did you mean order_cb?"},
	{"binding gray list", `
		binding r {
			gray product_canary,product_canery
		}`, "respond ok", "Caddyfile:17", `"product_canery"`, "did you mean product_canary?"},
	{"gray fallback_on_open", `
		gray other {
			target_version v3
			fallback_on_open no_such_breaker
		}`, "respond ok", "Caddyfile:18", `"no_such_breaker"`, ""},
	{"ratelimit rule id", "", "ratelimit order_apj", "Caddyfile:19", `"order_apj"`, "did you mean order_api?"},
	{"ratelimit block rule", "", "ratelimit {\n\t\trule order_apj\n\t}", "Caddyfile:20", `"order_apj"`, "did you mean order_api?"},
	{"ratelimit route", "", "ratelimit {\n\t\troute order_rout\n\t}", "Caddyfile:20", `"order_rout"`, "did you mean order_route?"},
	{"circuitbreaker rule id", "", "circuitbreaker order_bc", "Caddyfile:19", `"order_bc"`, "did you mean order_cb?"},
	{"circuitbreaker route", "", "circuitbreaker {\n\t\troute order_rout\n\t}", "Caddyfile:20", `"order_rout"`, "did you mean order_route?"},
	{"grayroute rule ids", "", "grayroute product_canary product_canery", "Caddyfile:19", `"product_canery"`, "did you mean product_canary?"},
	{"grayroute route", "", "grayroute {\n\t\troute order_rout\n\t}", "Caddyfile:20", `"order_rout"`, "did you mean order_route?"},
	{"grayroute inline fallback_on_open", "", "grayroute {\n\t\tgray g {\n\t\t\ttarget_version v2\n\t\t\tfallback_on_open order_bc\n\t\t}\n\t}", "Caddyfile:22", `"order_bc"`, "did you mean order_cb?"},
}

func danglingCaddyfile(redis, global, site string) string {
	return "{\n\trulestore {" + redis + globalRules + global + "\n\t}\n}\nhttp://localhost:1 {\n\t" + site + "\n}\n"
}

// Finding 3 of issue 13: a rule reference with a typo passed validation
// without Redis, and every request then passed unlimited.
func TestDanglingReferenceFailsValidateWithoutRedis(t *testing.T) {
	for _, c := range danglingCases {
		t.Run(c.name, func(t *testing.T) {
			err := testcaddy.Validate(danglingCaddyfile("", c.global, c.site))
			if err == nil {
				t.Fatal("caddy validate accepted a reference to a rule that does not exist")
			}
			msg := err.Error()
			for _, want := range []string{c.line, c.id, c.hint} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q: want it to contain %q", msg, want)
				}
			}
		})
	}
}

// With Redis the rule may live there: validate must not fail (the store
// reports it at run time).
func TestDanglingReferencePassesValidateWithRedis(t *testing.T) {
	for _, c := range danglingCases {
		t.Run(c.name, func(t *testing.T) {
			cf := danglingCaddyfile("\n\t\tredis redis://127.0.0.1:1", c.global, c.site)
			if err := testcaddy.Validate(cf); err != nil {
				t.Fatalf("validate with redis: %v", err)
			}
		})
	}
}

// The same checks hold for a JSON config (no Caddyfile, so no line): the
// store checks its static rules' references when provisioned.
func TestDanglingReferenceFailsJSONConfigWithoutRedis(t *testing.T) {
	for _, c := range []struct{ name, apps, id string }{
		{"binding", `"rulestore": {"rate_limit": {"order_api": {"qps": 10}}, "binding": {"r": {"rate_limit": "order_apj"}}}`, "order_apj"},
		{"fallback_on_open", `"rulestore": {"gray": {"g": {"target_version": "v2", "fallback_on_open": "no_such_breaker"}}}`, "no_such_breaker"},
		{"inline gray fallback_on_open", `"rulestore": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [
			{"handler": "grayroute", "rules": [{"id": "g", "inline": {"target_version": "v2", "fallback_on_open": "no_such_breaker"}}]}]}]}}}`, "no_such_breaker"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg caddy.Config
			if err := caddy.StrictUnmarshalJSON([]byte(`{"admin": {"disabled": true}, "apps": {`+c.apps+`}}`), &cfg); err != nil {
				t.Fatal(err)
			}
			err := caddy.Validate(&cfg)
			if err == nil || !strings.Contains(err.Error(), c.id) {
				t.Fatalf("want an error naming %s, got %v", c.id, err)
			}
			withRedis := strings.Replace(c.apps, `"rulestore": {`, `"rulestore": {"redis": {"url": "redis://127.0.0.1:1"}, `, 1)
			withRedis = strings.Replace(withRedis, `{"redis": {"url": "redis://127.0.0.1:1"}, }`, `{"redis": {"url": "redis://127.0.0.1:1"}}`, 1)
			cfg = caddy.Config{}
			if err := caddy.StrictUnmarshalJSON([]byte(`{"admin": {"disabled": true}, "apps": {`+withRedis+`}}`), &cfg); err != nil {
				t.Fatal(err)
			}
			if err := caddy.Validate(&cfg); err != nil {
				t.Fatalf("with redis: %v", err)
			}
		})
	}
}
