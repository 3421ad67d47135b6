package caddyfile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestAdapt adapts every testdata/<directive>/*.caddyfiletest (a Caddyfile,
// a line of dashes, the expected JSON), compares the JSON and validates the
// Caddyfile as `caddy validate` does. UPDATE_GOLDEN=1 rewrites the JSON.
func TestAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	const sep = "\n----------\n"
	for _, file := range files {
		t.Run(strings.TrimPrefix(file, "testdata/"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, _ := strings.Cut(string(raw), sep)
			got, err := testcaddy.Adapt(input)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, got, "", "\t"); err != nil {
				t.Fatal(err)
			}
			if os.Getenv("UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(file, []byte(input+sep+buf.String()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.TrimSpace(buf.String()) != strings.TrimSpace(want) {
				t.Errorf("adapted JSON differs from %s:\n%s", file, buf.String())
			}
			if err := testcaddy.Validate(input); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}
