package testcaddy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StoreInstance is this process's Caddy running a config that holds only
// the rulestore app, with its admin endpoint on a free port and its DEBUG
// log written as JSON to a file the test reads: the harness of the rule
// store's tests and of its admin API's.
type StoreInstance struct {
	T       *testing.T
	Admin   int    // the admin endpoint's port on localhost
	LogPath string // the log file
	// Store is the rulestore app's config as last run.
	Store map[string]any
}

// NewStoreInstance picks the admin port and the log file; JSON then builds
// a config, and RunStore (or RunJSON with that config) runs it.
func NewStoreInstance(t *testing.T, store map[string]any) *StoreInstance {
	return &StoreInstance{T: t, Admin: FreePort(t), LogPath: filepath.Join(t.TempDir(), "caddy.log"), Store: store}
}

// RunStore runs a config whose rulestore app is store, until the test ends.
func RunStore(t *testing.T, store map[string]any) *StoreInstance {
	t.Helper()
	in := NewStoreInstance(t, store)
	RunJSON(t, in.JSON(store))
	return in
}

// JSON is the whole config around the rulestore app's config store.
func (in *StoreInstance) JSON(store map[string]any) []byte {
	cfg := map[string]any{
		"admin": map[string]any{"listen": fmt.Sprintf("localhost:%d", in.Admin), "config": map[string]any{"persist": false}},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
			"level":   "DEBUG",
			"writer":  map[string]any{"output": "file", "filename": in.LogPath},
			"encoder": map[string]any{"format": "json"},
		}}},
		"apps": map[string]any{"rulestore": store},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		in.T.Fatal(err)
	}
	return b
}

// Reload loads the config with store as the rulestore app's, as `caddy
// reload` does.
func (in *StoreInstance) Reload(store map[string]any) {
	in.T.Helper()
	ReloadJSON(in.T, in.JSON(store))
}

// Logs is the whole log so far.
func (in *StoreInstance) Logs() string {
	b, _ := os.ReadFile(in.LogPath)
	return string(b)
}

// WaitLog waits for a log line that holds every one of substrs.
func (in *StoreInstance) WaitLog(substrs ...string) {
	in.T.Helper()
	// 30 s: after a Redis restart the store's reconnect backoff alone may
	// wait up to 5 s, after a restart that takes seconds on a busy 2-core
	// machine; 10 s was seen to time out there. A wait, not a delay.
	found := func() bool {
		for _, line := range strings.Split(in.Logs(), "\n") {
			all := true
			for _, s := range substrs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !found(); {
		if time.Now().After(deadline) {
			in.T.Fatalf("timed out after 30s waiting for a log line with %q; the store's log:\n%s", substrs, in.StoreLogs())
		}
		time.Sleep(10 * time.Millisecond) // sleep: poll interval of the wait
	}
}

// StoreLogs is the rulestore's part of the log, for failure messages.
func (in *StoreInstance) StoreLogs() string {
	var out []string
	for _, line := range strings.Split(in.Logs(), "\n") {
		if strings.Contains(line, `"logger":"rulestore`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
