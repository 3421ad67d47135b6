package caddyfile_test

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

func TestRulestoreOptionErrorsNameFileLineAndReason(t *testing.T) {
	cases := []struct {
		name, caddyfile, want string
	}{
		{"bad field value", `{
	rulestore {
		rate_limit order_api {
			limit_type token_bucket
			qps -5
		}
	}
}
http://localhost:1 {
	respond ok
}`, "Caddyfile:5"},
		{"unknown option", `{
	rulestore {
		redis redis://127.0.0.1:1
		resync_every 3s
	}
}`, "Caddyfile:4"},
		{"bad id", `{
	rulestore {
		gray "bad id" {
			target_version v2
		}
	}
}`, "Caddyfile:3"},
		{"duplicate rule", `{
	rulestore {
		binding r {
			rate_limit a
		}
		binding r {
			rate_limit b
		}
	}
}`, "Caddyfile:6"},
		{"bad resync", `{
	rulestore {
		resync soon
	}
}`, "Caddyfile:3"},
		{"bad redis option", `{
	rulestore {
		redis {
			db minus-one
		}
	}
}`, "Caddyfile:4"},
		{"unknown binding field", `{
	rulestore {
		binding r {
			ratelimit a
		}
	}
}`, "Caddyfile:4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := testcaddy.Validate(c.caddyfile)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not point at %s", err, c.want)
			}
		})
	}
}

func TestRulestoreOptionAdapts(t *testing.T) {
	cfg, err := testcaddy.Adapt(`{
	rulestore {
		redis {
			addrs 10.0.0.1:6379 10.0.0.2:6379
			cluster
			username sluice
			password {env.REDIS_PASSWORD}
			read_timeout 500ms
		}
		prefix tenant1:
		resync 10s
		rate_limit order_api {
			limit_type token_bucket
			qps 100
			burst 110
			key_resolver userId
		}
		binding order_route {
			rate_limit order_api
			gray a,b
		}
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `"rulestore":{"redis":{"addrs":["10.0.0.1:6379","10.0.0.2:6379"],"cluster":true,"username":"sluice","password":"{env.REDIS_PASSWORD}","read_timeout":"500ms"},"prefix":"tenant1:","resync":"10s","rate_limit":{"order_api":{"limit_type":"token_bucket","qps":100,"burst":110,"key_resolver":"userId"}},"binding":{"order_route":{"rate_limit":"order_api","gray":["a","b"]}}}`
	if !strings.Contains(string(cfg), want) {
		t.Fatalf("adapted:\n%s\nwant it to contain:\n%s", cfg, want)
	}
}

func TestHandlerNamingUnknownRuleFailsWithoutRedis(t *testing.T) {
	for _, directive := range []string{"ratelimit", "circuitbreaker", "grayroute"} {
		err := testcaddy.Validate(`http://localhost:1 {
	` + directive + ` no_such_rule
	respond ok
}`)
		if err == nil || !strings.Contains(err.Error(), "no_such_rule") {
			t.Errorf("%s with an unknown rule: want an error naming it, got %v", directive, err)
		}
	}
}

func TestHandlerNamingUnknownRuleIsFineWithRedis(t *testing.T) {
	for _, directive := range []string{"ratelimit", "circuitbreaker", "grayroute"} {
		err := testcaddy.Validate(`{
	rulestore {
		redis redis://127.0.0.1:1
	}
}
http://localhost:1 {
	` + directive + ` arrives_later
	respond ok
}`)
		if err != nil {
			t.Errorf("%s: a rule that may arrive from Redis failed validation: %v", directive, err)
		}
	}
}
