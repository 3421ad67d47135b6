// Package testcaddy runs real Caddy for tests: in this process from a
// Caddyfile (fast, one instance at a time), or as a subprocess built from
// ./cmd/caddy (several instances, reloads, kill and restart).
package testcaddy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/sluicegw/sluice/internal/ports"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	// Caddy's standard modules and all of Sluice, as in the built binary.
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// FreePort returns a free loopback TCP port, never handed to another test
// process at the same time (see internal/ports).
func FreePort(t testing.TB) int {
	t.Helper()
	return ports.Free(t)
}

// Adapt turns a Caddyfile into Caddy's JSON config.
func Adapt(caddyfile string) ([]byte, error) {
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile),
		map[string]any{"filename": "Caddyfile"})
	return cfg, err
}

// Validate adapts and provisions a Caddyfile without starting it, as
// `caddy validate` does, and returns the error a user would see.
func Validate(caddyfile string) error {
	cfgJSON, err := Adapt(caddyfile)
	if err != nil {
		return err
	}
	return ValidateJSON(cfgJSON)
}

// ValidateJSON provisions a JSON config without starting it, as
// `caddy validate` does, and returns the error a user would see.
func ValidateJSON(cfgJSON []byte) error {
	var cfg caddy.Config
	if err := caddy.StrictUnmarshalJSON(cfgJSON, &cfg); err != nil {
		return err
	}
	return caddy.Validate(&cfg)
}

var inProcess sync.Mutex

// Run loads a Caddyfile into this process's Caddy and stops it when the test
// ends. Only one runs at a time per process (Caddy is a process singleton);
// the Caddyfile should set `admin localhost:<port>` from FreePort and
// `persist_config off`, or use Header to get both.
func Run(t testing.TB, caddyfile string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real Caddy; skipped under -short")
	}
	cfgJSON, err := Adapt(caddyfile)
	if err != nil {
		t.Fatalf("adapt Caddyfile: %v\n%s", err, caddyfile)
	}
	RunJSON(t, cfgJSON)
}

// loaded is the config last loaded in this process (guarded by inProcess).
var loaded []byte

// RunJSON loads a JSON config into this process's Caddy, like Run.
func RunJSON(t testing.TB, cfgJSON []byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real Caddy; skipped under -short")
	}
	inProcess.Lock()
	// A data directory of the test's own: the rule store keeps its local
	// rule snapshot there, which another test's must never seed.
	dataDir, hadDataDir := os.LookupEnv("XDG_DATA_HOME")
	os.Setenv("XDG_DATA_HOME", t.TempDir())
	restore := func() {
		if hadDataDir {
			os.Setenv("XDG_DATA_HOME", dataDir)
		} else {
			os.Unsetenv("XDG_DATA_HOME")
		}
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		restore()
		inProcess.Unlock()
		t.Fatalf("load config: %v\n%s", err, cfgJSON)
	}
	loaded = cfgJSON
	t.Cleanup(func() {
		caddy.Stop()
		loaded = nil
		client.CloseIdleConnections()
		restore()
		inProcess.Unlock()
	})
}

// Reload replaces the running in-process config, as `caddy reload` does,
// and returns once the old generation no longer accepts connections.
//
// Why the wait: caddy.Load returns once the old servers have *started* to
// shut down (Caddy's http app runs Shutdown in goroutines), and the old and
// new listeners share each port through SO_REUSEPORT. A connection the
// kernel queued on the old listener in that window is reset when it
// closes, and the old server closes its idle keep-alive connections, so a
// request sent at once could get "connection reset by peer" before any
// response byte. Waiting until every listener address of both configs is
// held by at most one listener, then dropping the shared client's idle
// connections, makes the next request use a fresh connection to the new
// generation. Tests that send traffic *during* reloads must instead count
// such resets (see faults: retried once, counted, bounded).
func Reload(t testing.TB, caddyfile string) {
	t.Helper()
	cfgJSON, err := Adapt(caddyfile)
	if err != nil {
		t.Fatalf("adapt Caddyfile: %v", err)
	}
	ReloadJSON(t, cfgJSON)
}

// ReloadJSON is Reload for a JSON config.
func ReloadJSON(t testing.TB, cfgJSON []byte) {
	t.Helper()
	addrs := append(listenAddrs(t, loaded), listenAddrs(t, cfgJSON)...)
	if err := caddy.Load(cfgJSON, true); err != nil {
		t.Fatalf("reload config: %v", err)
	}
	loaded = cfgJSON
	Eventually(t, 10*time.Second, "the old generation's listeners closed", func() bool {
		for _, a := range addrs {
			if caddy.ListenerUsage(a[0], a[1]) > 1 {
				return false
			}
		}
		return true
	})
	// Caddy drops a listener from its pool just before it closes the
	// socket, so on a busy machine the pool can say "closed" while the
	// kernel still queues connections on the old socket. Wait for the
	// kernel's own word too (a fresh-clone run failed on that window with
	// "connect: connection reset by peer" right after a reload).
	// The admin endpoint is replaced the same way on every load (the new
	// one starts before the old one stops): a fresh-clone run got EOF from
	// the admin API right after a reload.
	want := portCounts(append(listenAddrs(t, cfgJSON), adminAddrs(t, cfgJSON)...))
	all := append(addrs, adminAddrs(t, cfgJSON)...)
	Eventually(t, 10*time.Second, "the kernel holds no old listening socket", func() bool {
		for port := range portCounts(all) {
			if n, ok := kernelListeners(port); ok && n > want[port] {
				return false
			}
		}
		return true
	})
	client.CloseIdleConnections()
}

// listenAddrs lists the (network, address) of every listener of an HTTP
// app config, as Caddy's listener pool keys them.
func listenAddrs(t testing.TB, cfgJSON []byte) [][2]string {
	t.Helper()
	if cfgJSON == nil {
		return nil
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatalf("config JSON: %v", err)
	}
	var out [][2]string
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, l := range srv.Listen {
			na, err := caddy.ParseNetworkAddress(l)
			if err != nil {
				t.Fatalf("listen address %q: %v", l, err)
			}
			for _, a := range na.Expand() {
				out = append(out, [2]string{a.Network, a.JoinHostPort(0)})
			}
		}
	}
	return out
}

// adminAddrs lists the admin endpoint's listener of a config, if it has
// one on TCP.
func adminAddrs(t testing.TB, cfgJSON []byte) [][2]string {
	t.Helper()
	var cfg struct {
		Admin struct {
			Disabled bool   `json:"disabled"`
			Listen   string `json:"listen"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatalf("config JSON: %v", err)
	}
	if cfg.Admin.Disabled || cfg.Admin.Listen == "" {
		return nil
	}
	na, err := caddy.ParseNetworkAddress(cfg.Admin.Listen)
	if err != nil || na.IsUnixNetwork() {
		return nil
	}
	return [][2]string{{na.Network, na.JoinHostPort(0)}}
}

// Options returns a global-options block body that pins the admin endpoint to
// a free port and keeps Caddy from writing state outside the test.
func Options(t testing.TB) string {
	return fmt.Sprintf("admin localhost:%d\n\tpersist_config off\n\tstorage file_system %s",
		FreePort(t), t.TempDir())
}

// Get sends a GET with optional headers given as "Name: value" strings.
func Get(t testing.TB, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return Do(t, req)
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// adminClient talks to a Caddy's admin endpoint on a new connection each
// time: a load restarts the admin server, and a kept-alive connection to
// the old one ended the next request with EOF (TestRedisTLSAndACL's
// reload, once in a CI run beside another).
var adminClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// Do sends a request and reads the whole body.
func Do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond) // sleep: poll interval of the wait itself
	}
}

// Settled waits until two readings of count taken 200 ms apart agree and
// returns that value, or fails the test: a leak baseline taken before
// things settle would loosen every leak check after it.
func Settled(t testing.TB, timeout time.Duration, what string, count func() int) int {
	t.Helper()
	var v int
	Eventually(t, timeout, what+" to settle (two equal readings 200ms apart)", func() bool {
		a := count()
		time.Sleep(200 * time.Millisecond) // sleep: the interval between the two readings compared
		v = count()
		return a == v
	})
	return v
}

// Process is Caddy running as a subprocess of the test.
type Process struct {
	AdminPort int
	Log       *bytes.Buffer

	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds ./cmd/caddy once per test run and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "sluice-caddy-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/caddy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/caddy: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Start runs the built Caddy on a Caddyfile whose global block must contain
// `admin localhost:{{admin}}`; {{admin}} is replaced by a free port.
func Start(t testing.TB, caddyfile string) *Process {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real Caddy; skipped under -short")
	}
	p := &Process{t: t, dir: t.TempDir(), AdminPort: FreePort(t), Log: new(bytes.Buffer)}
	p.start(caddyfile)
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() { // what the process logged is what explains a failure
			t.Logf("caddy (admin :%d) logged, last 8 KiB:\n%s", p.AdminPort, tail(p.Logs(), 8<<10))
		}
	})
	return p
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *Process) expand(caddyfile string) string {
	return strings.ReplaceAll(caddyfile, "{{admin}}", strconv.Itoa(p.AdminPort))
}

func (p *Process) start(caddyfile string) {
	p.t.Helper()
	path := filepath.Join(p.dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(p.expand(caddyfile)), 0o644); err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(Binary(p.t), "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+p.dir, "XDG_DATA_HOME="+p.dir, "XDG_CONFIG_HOME="+p.dir)
	cmd.Stdout, cmd.Stderr = p.writer(), p.writer()
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(p.done)
	Eventually(p.t, 20*time.Second, "caddy admin endpoint", func() bool {
		select {
		case <-p.done:
			p.t.Fatalf("caddy exited:\n%s", p.Logs())
		default:
		}
		resp, err := adminClient.Get(fmt.Sprintf("http://localhost:%d/config/", p.AdminPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

type lockedWriter struct{ p *Process }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.Log.Write(b)
}

func (p *Process) writer() io.Writer { return lockedWriter{p} }

// Dir is the process's home and data directory (HOME, XDG_DATA_HOME), kept
// across Restart: Caddy's data directory is Dir()/caddy.
func (p *Process) Dir() string { return p.dir }

// Logs returns what Caddy has logged so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Log.String()
}

// Reload posts a new Caddyfile to the admin API, as `caddy reload` does,
// and returns once the kernel lists no socket of the old generation still
// listening (see ReloadJSON for why).
func (p *Process) Reload(caddyfile string) error {
	url := fmt.Sprintf("http://localhost:%d/load", p.AdminPort)
	resp, err := adminClient.Post(url, "text/caddyfile", strings.NewReader(p.expand(caddyfile)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("reload: %s: %s", resp.Status, body)
	}
	// The load replaced the admin endpoint (the new one starts before the
	// old one stops): read the config once the old one is gone.
	Eventually(p.t, 10*time.Second, "one admin endpoint listening", func() bool {
		n, ok := kernelListeners(p.AdminPort)
		return !ok || n <= 1
	})
	cfg, err := p.config()
	if err != nil {
		return err
	}
	want := portCounts(listenAddrs(p.t, cfg))
	Eventually(p.t, 10*time.Second, "the kernel holds no old listening socket", func() bool {
		for port, n := range want {
			if got, ok := kernelListeners(port); ok && got > n {
				return false
			}
		}
		return true
	})
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections() // tests' own admin clients on the default transport
	return nil
}

// config reads the running config from the process's admin API.
func (p *Process) config() ([]byte, error) {
	resp, err := adminClient.Get(fmt.Sprintf("http://localhost:%d/config/", p.AdminPort))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Stop kills the process and waits for it.
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Restart stops the process and starts it again on the same Caddyfile.
func (p *Process) Restart(caddyfile string) {
	p.Stop()
	p.start(caddyfile)
}
