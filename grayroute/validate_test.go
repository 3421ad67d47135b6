package grayroute_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

func TestBadCaddyfileFailsValidateWithLineAndReason(t *testing.T) {
	for _, c := range []struct {
		name, block string
		want        []string
	}{
		{"unknown option", "grayroute {\n\t\tcolour red\n\t}", []string{"Caddyfile:5", `unknown field 'colour' in grayroute`}},
		{"bad inline field names the field and its line", "grayroute {\n\t\tgray beta {\n\t\t\ttarget_version v2\n\t\t\tweight 150\n\t\t}\n\t}",
			[]string{"Caddyfile:7", "weight", "0 to 100"}},
		{"unknown inline field", "grayroute {\n\t\tgray beta {\n\t\t\ttarget_version v2\n\t\t\twieght 10\n\t\t}\n\t}",
			[]string{"Caddyfile:7", "wieght", "unknown field"}},
		{"inline rule without target", "grayroute {\n\t\tgray beta {\n\t\t\tweight 10\n\t\t}\n\t}",
			[]string{"Caddyfile:5", "target_version", "required"}},
		{"bad default_version", "grayroute a {\n\t\tdefault_version v1/../x\n\t}", []string{"Caddyfile:5", "default_version"}},
		{"route and rules", "grayroute a {\n\t\troute checkout\n\t}", []string{"Caddyfile:", "either a route or rules"}},
		{"no rules", "grayroute", []string{"Caddyfile:4", "no gray rules"}},
		{"bad header name", "grayroute a {\n\t\theader X:Bad\n\t}", []string{"Caddyfile:5", "header"}},
		{"rule listed twice", "grayroute a a", []string{"Caddyfile:4", "listed twice"}},
		{"missing rule without redis", "grayroute nosuch", []string{`no gray rule "nosuch"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fmt.Sprintf("{\n}\nhttp://127.0.0.1:1 {\n\t%s\n\trespond ok\n}\n", c.block)
			err := testcaddy.Validate(cfg)
			if err == nil {
				t.Fatalf("validate passed:\n%s", cfg)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), ", at :0") {
				t.Errorf("the error lost its file and line")
			}
		})
	}
}

func TestRampFromWallClock(t *testing.T) {
	addr, url := site(t)
	now := time.Now().UTC()
	testcaddy.Run(t, fmt.Sprintf(`{
	%s
	rulestore {
		gray done {
			match_tag      X-Group
			match_value    a
			target_version v2
			ramp           "%s 30m 10,50,100"
		}
		gray future {
			match_tag      X-Group
			match_value    b
			target_version v2
			ramp           "%s 1h"
		}
		gray capped {
			match_tag      X-Group
			match_value    c
			target_version v2
			weight         0
			ramp           "%s 30m 10,50,100"
		}
	}
}
%s {
	grayroute done future capped
	%s
}`, testcaddy.Options(t), now.Add(-2*time.Hour).Format(time.RFC3339), now.Add(24*time.Hour).Format(time.RFC3339),
		now.Add(-2*time.Hour).Format(time.RFC3339), addr, echoSite))

	for i := range 50 {
		user := fmt.Sprintf("X-User-Id: %d", i)
		if got := version(get(t, url, "X-Group: a", user)); got != "v2" {
			t.Fatalf("ramp finished (100%%): user %d got %s", i, got)
		}
		if got := version(get(t, url, "X-Group: b", user)); got != "v1" {
			t.Fatalf("ramp not started (0%%): user %d got %s", i, got)
		}
		if got := version(get(t, url, "X-Group: c", user)); got != "v1" {
			t.Fatalf("weight 0 caps a finished ramp: user %d got %s", i, got)
		}
	}
}
