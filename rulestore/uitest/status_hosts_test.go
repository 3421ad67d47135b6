package uitest

// sluice_status writes are taken only for the site's own names (or its
// origins), as Caddy's admin endpoint checks its Host: a page that
// re-points its own name at the gateway (DNS rebinding) sends Host =
// Origin = its name and Sec-Fetch-Site: same-origin.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

const cbStateKey = "circuit_breaker:rule:cb"

func hostsCaddyfile(t *testing.T, redisURL string, any int, extraSites string) string {
	return fmt.Sprintf(`{
	%[1]s
	rulestore {
		redis %[2]s
		circuit_breaker cb {
			failure_threshold 5
			open_duration 1h
		}
	}
}
# Any Host, guarded by the client address only.
http://:%[3]d {
	bind 127.0.0.1
	@outside not remote_ip 127.0.0.1/8
	respond @outside 403
	handle /sluice/* {
		sluice_status allow_writes
	}
	route /api {
		circuitbreaker cb
		respond "ok"
	}
}
%[4]s
`, testcaddy.Options(t), redisURL, any, extraSites)
}

// statusWrite sends a write to 127.0.0.1:port with this Host and headers.
func statusWrite(t *testing.T, port int, host, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), strings.NewReader(body))
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, b := testcaddy.Do(t, req)
	return resp.StatusCode, b
}

func cbState(t *testing.T, rc *redis.Client) string {
	t.Helper()
	v, err := rc.HGet(context.Background(), cbStateKey, "state").Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStatusWriteRefusesRebinding(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client()
	anyPort := testcaddy.FreePort(t)
	testcaddy.Run(t, hostsCaddyfile(t, r.URL(), anyPort, ""))
	evil := fmt.Sprintf("evil.example:%d", anyPort)

	// Reads are unaffected: the page answers any Host.
	if code, body := statusWrite(t, anyPort, evil, http.MethodGet, "/sluice/ui/", ""); code != 200 {
		t.Errorf("GET the page with Host %s: %d %s, want 200", evil, code, body)
	}
	code, body := statusWrite(t, anyPort, evil, http.MethodPatch, "/sluice/rules/circuit_breaker/cb", `{"state": "force_open"}`,
		"Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json")
	if code != http.StatusForbidden || !strings.Contains(body, "origins") {
		t.Errorf("rebinding PATCH (Host = Origin = %s): %d %s, want 403 naming origins", evil, code, body)
	}
	if got := cbState(t, rc); got != "" {
		t.Errorf("after the rebinding PATCH Redis holds state %q, want nothing written", got)
	}
	if code, body := statusWrite(t, anyPort, fmt.Sprintf("127.0.0.1:%d", anyPort), http.MethodGet, "/api", ""); code != 200 {
		t.Errorf("GET /api after the rebinding PATCH: %d %s, want 200 (breaker not forced open)", code, body)
	}
}

func TestStatusWriteOwnHosts(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client()
	anyPort, listed, named := testcaddy.FreePort(t), testcaddy.FreePort(t), testcaddy.FreePort(t)
	testcaddy.Run(t, hostsCaddyfile(t, r.URL(), anyPort, fmt.Sprintf(`
# Any Host, with the names writes may use listed.
http://:%[1]d {
	bind 127.0.0.1
	handle /sluice/* {
		sluice_status allow_writes {
			origins gw.internal:%[1]d
		}
	}
}
# A site with a name of its own.
http://ops.example:%[2]d {
	bind 127.0.0.1
	handle /sluice/* {
		sluice_status allow_writes
	}
}
`, listed, named)))
	patch := func(port int, host, state string, headers ...string) (int, string) {
		t.Helper()
		return statusWrite(t, port, host, http.MethodPatch, "/sluice/rules/circuit_breaker/cb", fmt.Sprintf(`{"state": %q}`, state),
			append([]string{"Content-Type", "application/json"}, headers...)...)
	}
	for _, c := range []struct {
		what  string
		port  int
		host  string
		state string
		want  int
	}{
		{"origins entry", listed, fmt.Sprintf("gw.internal:%d", listed), "force_open", 200},
		{"origins entry, another port", listed, "gw.internal:1", "force_closed", 403},
		{"not in origins", listed, fmt.Sprintf("evil.example:%d", listed), "force_closed", 403},
		{"site's own name", named, fmt.Sprintf("ops.example:%d", named), "force_closed", 200},
		{"loopback name, no names declared", anyPort, fmt.Sprintf("localhost:%d", anyPort), "auto", 200},
	} {
		wantState := cbState(t, rc)
		if c.want == 200 {
			wantState = c.state
		}
		code, body := patch(c.port, c.host, c.state, "Origin", "http://"+c.host, "Sec-Fetch-Site", "same-origin")
		if code != c.want {
			t.Errorf("%s: PATCH with Host %s: %d %s, want %d", c.what, c.host, code, body, c.want)
		}
		if got := cbState(t, rc); got != wantState {
			t.Errorf("%s: Redis state %q, want %q", c.what, got, wantState)
		}
	}
}

// origins only admit writes: without allow_writes, or with no host, the
// config is refused with a clear error.
func TestStatusOriginsConfigErrors(t *testing.T) {
	for _, c := range []struct{ block, want string }{
		{"sluice_status {\n\t\torigins gw.internal\n\t}", "add allow_writes"},
		{"sluice_status allow_writes {\n\t\torigins\n\t}", "at least one host"},
		{"sluice_status allow_writes {\n\t\torigins gw.internal/path\n\t}", "want host[:port]"},
		{"sluice_status allow_writes {\n\t\thosts gw.internal\n\t}", "unknown subdirective"},
	} {
		err := testcaddy.Validate(fmt.Sprintf("http://:8080 {\n\thandle /sluice/* {\n\t%s\n\t}\n}\n", c.block))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.block, err, c.want)
		}
	}
}
