package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// identicalBlock is one inline rule, written the same in two sites.
const identicalBlock = `
	ratelimit {
		qps 0.01
		burst 10
		key_resolver ip
	}
	respond "ok"`

// inlineIDs returns the ids the adapted config gives the inline rate_limit
// rules ("" for none), by the port of the server they are in.
func inlineIDs(t *testing.T, cfg string) map[string][]string {
	t.Helper()
	cfgJSON, err := testcaddy.Adapt(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string        `json:"listen"`
					Rest   json.RawMessage `json:"routes"`
					Named  json.RawMessage `json:"named_routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &c); err != nil {
		t.Fatal(err)
	}
	inline := regexp.MustCompile(`"handler":"ratelimit","inline":(\{[^{}]*\})`)
	ids := map[string][]string{}
	for _, srv := range c.Apps.HTTP.Servers {
		port := srv.Listen[0][strings.LastIndex(srv.Listen[0], ":")+1:]
		for _, m := range inline.FindAllStringSubmatch(string(srv.Rest)+string(srv.Named), -1) {
			var f struct{ ID string }
			if err := json.Unmarshal([]byte(m[1]), &f); err != nil {
				t.Fatal(err)
			}
			ids[port] = append(ids[port], f.ID)
		}
	}
	return ids
}

// port is a site URL's port.
func port(url string) string { return url[strings.LastIndex(url, ":")+1:] }

// Two sites on different addresses (two servers, which Caddy provisions in
// no fixed order) with the same inline block: each block is its own quota,
// named by the Caddyfile's order, and each keeps its own across reloads.
func TestIdenticalInlineBlocksAreTheirOwnQuota(t *testing.T) {
	s := caddyfile(t, "", identicalBlock, identicalBlock)
	a, b := s.urls[0], s.urls[1]
	byPort := inlineIDs(t, s.cfg)
	ids := [2][]string{byPort[port(a)], byPort[port(b)]}
	if len(ids[0]) != 1 || len(ids[1]) != 1 || ids[0][0] != "" || !regexp.MustCompile(`^inline:[0-9a-f]{16}-2$`).MatchString(ids[1][0]) {
		t.Fatalf("adapted ids %q, want none in the first site (its hash), inline:<hash>-2 in the second", ids)
	}
	idOfB := ids[1][0]
	idOfA := strings.TrimSuffix(idOfB, "-2")
	testcaddy.Run(t, s.cfg)
	for i := 0; i < 10; i++ {
		expect(t, a, []int{200})
	}
	if resp, _ := testcaddy.Get(t, a); resp.StatusCode != 429 || !strings.HasPrefix(resp.Header.Get("RateLimit-Policy"), `"`+idOfA+`"`) {
		t.Fatalf("a: %d, RateLimit-Policy %q, want 429 by rule %s", resp.StatusCode, resp.Header.Get("RateLimit-Policy"), idOfA)
	}
	// b's block has the same fields and a quota of its own.
	remainingOfB := func(want int) {
		t.Helper()
		resp, _ := testcaddy.Get(t, b)
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(want) {
			t.Fatalf("b: %d with %s remaining, want 200 with %d (a's block took its own quota)",
				resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want)
		}
		if pol := resp.Header.Get("RateLimit-Policy"); !strings.HasPrefix(pol, `"`+idOfB+`"`) {
			t.Fatalf("b's RateLimit-Policy %q, want rule %s", pol, idOfB)
		}
	}
	remainingOfB(9)
	// Each reload provisions the two servers in a new order; the quotas
	// stay with their blocks.
	for i := 1; i <= 4; i++ {
		testcaddy.Reload(t, s.cfg+strings.Repeat("\n", i))
		expect(t, a, []int{429})
		remainingOfB(9 - i)
	}
}

// The adapter names blocks in the order of the whole Caddyfile, snippets
// where they are imported, named routes apart from the sites.
func TestInlineBlockNamesFollowTheCaddyfile(t *testing.T) {
	block := "ratelimit {\n\t\tqps 5\n\t}\n\trespond ok"
	s := caddyfile(t, "",
		"import limited",
		block,
		"ratelimit {\n\t\tid mine\n\t\tqps 5\n\t}\n\trespond ok",
		"invoke limited_route")
	end := strings.Index(s.cfg, "\n}\n") + 3 // after the global options
	cfg := s.cfg[:end] + "(limited) {\n\t" + block + "\n}\n&(limited_route) {\n\t" + block + "\n}\n" + s.cfg[end:]
	byPort := inlineIDs(t, cfg)
	site := func(i int) string { return strings.Join(byPort[port(s.urls[i])], " ") }
	// The snippet is imported in the first site, before the second's block:
	// the first keeps the plain hash (no id written), the second is -2.
	h := strings.TrimSuffix(site(1), "-2")
	if !regexp.MustCompile(`^inline:[0-9a-f]{16}$`).MatchString(h) {
		t.Fatalf("ids by site %v: the second site's block is not named <hash>-2", byPort)
	}
	if site(0) != "" || site(2) != "mine" || site(3) != h+"-r1" {
		t.Fatalf("ids by site %q, want none, %s-2, mine and %[2]s-r1 (the named route's)", []string{site(0), site(1), site(2), site(3)}, h)
	}
	if again := inlineIDs(t, cfg); fmt.Sprint(again) != fmt.Sprint(byPort) {
		t.Fatalf("adapting again named the blocks %v, first %v", again, byPort)
	}
}

// In JSON the adapter is not there to name blocks: two identical inline
// rules without an id are refused, naming the fix; with ids they load.
func TestIdenticalInlineBlocksWithoutIDsInJSON(t *testing.T) {
	route := func(id string) map[string]any {
		inline := map[string]any{"qps": 5}
		if id != "" {
			inline["id"] = id
		}
		return map[string]any{"handle": []any{
			map[string]any{"handler": "ratelimit", "inline": inline},
			map[string]any{"handler": "static_response", "body": "ok"},
		}}
	}
	listen := func() []string { return []string{"127.0.0.1:" + strconv.Itoa(testcaddy.FreePort(t))} }
	config := func(id1, id2 string) string {
		cfg := map[string]any{"apps": map[string]any{"http": map[string]any{"servers": map[string]any{
			"a": map[string]any{"listen": listen(), "routes": []any{route(id1)}},
			"b": map[string]any{"listen": listen(), "routes": []any{route(id2)}},
		}}}}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	err := testcaddy.ValidateJSON([]byte(config("", "")))
	if err == nil || !strings.Contains(err.Error(), "two inline rate_limit rules without an id have the same fields") ||
		!strings.Contains(err.Error(), "give each an id") {
		t.Fatalf("identical id-less inline rules: %v, want the error naming the fix", err)
	}
	for _, ids := range [][2]string{{"a", "b"}, {"shared", "shared"}, {"a", ""}} {
		if err := testcaddy.ValidateJSON([]byte(config(ids[0], ids[1]))); err != nil {
			t.Errorf("ids %q: %v", ids, err)
		}
	}
}
