package rulestore_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicegw/sluice/internal/redistest"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

type historyEntry struct {
	Version, PrevVersion, Op, Via string
	Prev, Fields                  map[string]string
}

func adminCall(t *testing.T, p *testcaddy.Process, method, path, body string) (int, string) {
	t.Helper()
	code, answer, _ := adminWith(t, p, method, path, body)
	return code, answer
}

func historyOf(t *testing.T, p *testcaddy.Process, kind, id string) []historyEntry {
	t.Helper()
	code, body := adminCall(t, p, "GET", "/sluice/rules/"+kind+"/"+id+"/history", "")
	if code != 200 {
		t.Fatalf("history: %d %s", code, body)
	}
	var h []struct {
		Version     string            `json:"version"`
		PrevVersion string            `json:"prev_version"`
		Op          string            `json:"op"`
		Via         string            `json:"via"`
		Prev        map[string]string `json:"prev"`
		Fields      map[string]string `json:"fields"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	out := make([]historyEntry, len(h))
	for i, e := range h {
		out[i] = historyEntry{e.Version, e.PrevVersion, e.Op, e.Via, e.Prev, e.Fields}
	}
	return out
}

// overlayOf is the raw fields an instance holds over its static rule.
func overlayOf(t *testing.T, p *testcaddy.Process, kind, id string) string {
	t.Helper()
	_, body := adminCall(t, p, "GET", "/sluice/rules/"+kind+"/"+id, "")
	var v struct {
		Overlay map[string]string `json:"overlay"`
	}
	json.Unmarshal([]byte(body), &v)
	b, _ := json.Marshal(v.Overlay)
	return string(b)
}

// A raw write seen by two instances is recorded once; an admin write once
// too; a rollback restores the exact previous fields on every instance; the
// history survives a restart.
func TestHistoryAndRollbackAcrossInstances(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client()
	var procs []*testcaddy.Process
	var files []string
	for range 2 {
		f := killSwitchCaddyfile(r.URL(), testcaddy.FreePort(t))
		files = append(files, f)
		procs = append(procs, testcaddy.Start(t, f))
	}
	a, b := procs[0], procs[1]
	waitOverlay := func(want string) {
		t.Helper()
		for i, p := range procs {
			testcaddy.Eventually(t, 10*time.Second, fmt.Sprintf("instance %d overlay %s", i, want), func() bool {
				return overlayOf(t, p, "gray", "canary") == want
			})
		}
	}

	redistest.Push(t, c, "gray:rule:canary", "gateway:rules:gray", "canary", "weight", "10")
	waitOverlay(`{"weight":"10"}`)
	// Both instances applied it and record it: one entry.
	testcaddy.Eventually(t, 10*time.Second, "raw write recorded", func() bool { return len(historyOf(t, a, "gray", "canary")) == 1 })
	testcaddy.Eventually(t, 10*time.Second, "both verdicts", func() bool {
		return c.HLen(t.Context(), "gateway:status:gray:canary").Val() == 2
	})
	h := historyOf(t, b, "gray", "canary")
	if len(h) != 1 || h[0].Via != "redis" || h[0].Fields["weight"] != "10" || h[0].Prev != nil {
		t.Fatalf("history after one raw write seen by two instances: %+v", h)
	}
	v10 := h[0].Version

	if code, body := adminCall(t, a, "PATCH", "/sluice/rules/gray/canary", `{"weight": 60, "fallback_version": "v0"}`); code != 200 {
		t.Fatalf("PATCH: %d %s", code, body)
	}
	waitOverlay(`{"fallback_version":"v0","weight":"60"}`)
	h = historyOf(t, b, "gray", "canary")
	if len(h) != 2 || h[0].Via != "admin_api" || h[0].PrevVersion != v10 || h[0].Prev["weight"] != "10" {
		t.Fatalf("history after PATCH: %+v", h)
	}

	// Roll back through the other instance: both hold exactly {weight: 10}.
	if code, body := adminCall(t, b, "POST", "/sluice/rules/gray/canary/rollback?version="+v10, ""); code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	waitOverlay(`{"weight":"10"}`)
	if f := c.HGetAll(t.Context(), "gray:rule:canary").Val(); len(f) != 1 || f["weight"] != "10" {
		t.Fatalf("hash after rollback: %v", f)
	}
	if code, body := adminCall(t, b, "POST", "/sluice/rules/gray/canary/rollback?version=nope", ""); code != 404 {
		t.Fatalf("rollback to an unknown version: %d %s", code, body)
	}

	// A restarted instance sees the same history.
	a.Restart(files[0])
	h = historyOf(t, a, "gray", "canary")
	if len(h) != 3 || h[0].Op != "rollback" || h[0].Via != "admin_api" || h[0].Version != v10 {
		t.Fatalf("history after restart: %+v", h)
	}
	if n := c.LLen(t.Context(), "gateway:history:gray:canary").Val(); n != 3 {
		t.Fatalf("history list has %d entries, want 3", n)
	}
}
