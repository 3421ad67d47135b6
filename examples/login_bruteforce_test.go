package examples_test

import (
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestLoginBruteforce: examples/login-bruteforce, as its README shows, then
// with scope cluster from rules.sh.
func TestLoginBruteforce(t *testing.T) {
	s := startScenario(t, "login-bruteforce")
	login := s.gateway + "/login"
	user := func(u string) string { return "X-Login-User: " + u }
	right, guess := "X-Password: right", "X-Password: guess"

	if got := codes(t, 3, login, user("alice"), right); got != "200 200 200" {
		t.Fatalf("alice's successes: %s, want free 200s", got)
	}
	if got := codes(t, 6, login, user("alice"), guess); got != "401 401 401 401 401 429" {
		t.Fatalf("alice's guesses: %s, want five 401s then 429", got)
	}
	resp, body := testcaddy.Get(t, login, user("alice"), right)
	if resp.StatusCode != 429 || !strings.Contains(body, `"error":"rate_limited"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("alice with the right password after 5 failures: %d %q, want 429 with Retry-After", resp.StatusCode, body)
	}
	resp, body = testcaddy.Get(t, login, user("bob"), right)
	if resp.StatusCode != 200 || body != "welcome bob" {
		t.Fatalf("bob: %d %q, want his own count", resp.StatusCode, body)
	}

	s.rulesSh(t)
	s.waitRule(t, "rate_limit/login_failures", `"scope":"cluster"`)
	if got := codes(t, 7, login, user("carol"), guess); got != "401 401 401 401 401 429 429" {
		t.Fatalf("carol's guesses after rules.sh (scope cluster): %s", got)
	}
	if got := codes(t, 2, login, user("dave"), right); got != "200 200" {
		t.Fatalf("dave after rules.sh: %s", got)
	}
}
