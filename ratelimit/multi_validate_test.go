package ratelimit_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// lineOf is the 1-based line of the first line of cfg holding s.
func lineOf(t *testing.T, cfg, s string) int {
	t.Helper()
	for i, l := range strings.Split(cfg, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the Caddyfile", s)
	return 0
}

// A bad list of rules fails caddy validate with the file and line: an
// unknown id (with the nearest declared one suggested), an id listed
// twice, a bad or unknown field in a limit block, and a list mixed with
// route or with inline fields. A rule that shapes traffic cannot be one of
// several.
func TestSeveralLimitsValidateErrors(t *testing.T) {
	const global = "\trulestore {\n\t\trate_limit daily_api {\n\t\t\tqps 1\n\t\t}\n\t\trate_limit burst_api {\n\t\t\tqps 1\n\t\t}\n\t}"
	cases := []struct {
		body, at, want string
	}{
		{"ratelimit burst_api daly_api", "daly_api", `no rate_limit rule "daly_api" (did you mean daily_api?)`},
		{"ratelimit {\n\t\trule burst_api\n\t\trule daly_api\n\t}", "daly_api", `did you mean daily_api?`},
		{"ratelimit burst_api burst_api", "burst_api burst_api", `rate_limit rule "burst_api" listed twice`},
		{"ratelimit {\n\t\trule burst_api\n\t\tlimit {\n\t\t\tqps abc\n\t\t\tburst 2\n\t\t}\n\t}", "qps abc", `field qps="abc"`},
		{"ratelimit {\n\t\tlimit {\n\t\t\tqsp 1\n\t\t}\n\t\tlimit {\n\t\t\tqps 1\n\t\t}\n\t}", "qsp", `qsp`},
		{"ratelimit {\n\t\tlimit a {\n\t\t\tqps 1\n\t\t}\n\t\tlimit a {\n\t\t\tqps 2\n\t\t}\n\t}", "limit a {\n\t\t\tqps 2", `rate_limit rule "a" listed twice`},
		{"ratelimit {\n\t\troute api\n\t\tlimit {\n\t\t\tqps 1\n\t\t}\n\t}", "\tlimit {", `route cannot be mixed with a list of rules`},
		{"ratelimit {\n\t\tqps 1\n\t\tlimit {\n\t\t\tqps 2\n\t\t}\n\t}", "\tlimit {", `cannot be mixed with inline rule fields`},
	}
	for _, c := range cases {
		s := caddyfile(t, global, "\t"+c.body+"\n\trespond \"ok\"")
		at := c.at
		if i := strings.Index(at, "\n"); i >= 0 { // the second of two alike blocks
			at = at[:i]
			first := lineOf(t, s.cfg, at)
			rest := strings.Join(strings.Split(s.cfg, "\n")[first:], "\n")
			line := first + lineOf(t, rest, at)
			checkValidate(t, s.cfg, c.body, line, c.want)
			continue
		}
		checkValidate(t, s.cfg, c.body, lineOf(t, s.cfg, at), c.want)
	}
	// Shaping rules among several: refused when provisioned (no line).
	s := caddyfile(t, "", "\tratelimit {\n\t\tlimit {\n\t\t\tqps 1\n\t\t\tcontrol_behavior pace\n\t\t}\n\t\tlimit {\n\t\t\tqps 2\n\t\t}\n\t}\n\trespond \"ok\"")
	if err := testcaddy.Validate(s.cfg); err == nil || !strings.Contains(err.Error(), "can only be a handler's one rule, not one of several limits") {
		t.Errorf("pace among several: got %v", err)
	}
}

func checkValidate(t *testing.T, cfg, body string, line int, want string) {
	t.Helper()
	err := testcaddy.Validate(cfg)
	if err == nil || !strings.Contains(err.Error(), "Caddyfile:"+strconv.Itoa(line)) || !strings.Contains(err.Error(), want) {
		t.Errorf("%q: got %v, want Caddyfile:%d and %q", body, err, line, want)
	}
}
