package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The snapshot file is replaced whole (no temporary file left behind),
// read back as written, and a file of another format or garbage is an
// error, never an empty snapshot.
func TestDiskSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice", Name([]string{"b:1", "a:1"}, 0, "", "p:"))
	if d, err := Read(path); d != nil || err != nil {
		t.Fatalf("missing file: %v %v, want nil, nil", d, err)
	}
	want := &File{Format: Format, Epoch: "e1", Rules: map[string]map[string]Rule{
		"rate_limit": {"a": {Fields: map[string]string{"qps": "1"}}, "b": {Fields: map[string]string{"qps": "2"}, Retained: true}}}}
	for range 2 {
		if err := Write(path, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(path)
	if err != nil || got.Epoch != "e1" || got.Rules["rate_limit"]["a"].Fields["qps"] != "1" || !got.Rules["rate_limit"]["b"].Retained {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files in the snapshot directory, want 1 (no temporary file left)", len(entries))
	}
	if Name([]string{"a:1", "b:1"}, 0, "", "p:") != filepath.Base(path) || Name([]string{"a:1", "b:1"}, 0, "", "q:") == filepath.Base(path) {
		t.Error("the file name must depend on the addresses (in any order) and the prefix")
	}
	for content, wantErr := range map[string]string{`{"format":2}`: "format 2", `{"format":1,`: "not a rule snapshot"} {
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want an error saying %q", content, err, wantErr)
		}
	}
}
