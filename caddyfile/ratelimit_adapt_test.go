package caddyfile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	_ "github.com/sluicegw/sluice/caddyfile"
	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestRatelimitAdapt adapts each testdata/ratelimit/*.caddyfiletest (a
// Caddyfile, a line of dashes, the expected JSON), compares the JSON and
// validates the Caddyfile. RATELIMIT_UPDATE=1 rewrites the expected JSON.
func TestRatelimitAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/ratelimit/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	const sep = "\n----------\n"
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
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
			if os.Getenv("RATELIMIT_UPDATE") == "1" {
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

// TestRatelimitDirectiveOrder checks, in a plain Caddyfile with the
// directives written in reverse, that the adapted route runs ratelimit
// first, then circuitbreaker, grayroute, and the standard directives, with
// reverse_proxy last: no route block needed.
func TestRatelimitDirectiveOrder(t *testing.T) {
	cfg, err := testcaddy.Adapt(`
http://127.0.0.1:8080 {
	reverse_proxy 127.0.0.1:9001
	handle /static/* {
		respond "static"
	}
	request_header X-Gateway sluice
	grayroute canary
	circuitbreaker backend
	ratelimit api
}`)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []struct {
							Handler string          `json:"handler"`
							Routes  json.RawMessage `json:"routes"`
						} `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, srv := range doc.Apps.HTTP.Servers {
		for _, r := range srv.Routes {
			for _, h := range r.Handle {
				if h.Handler != "subroute" {
					got = append(got, h.Handler)
					continue
				}
				// The site's subroute: list its routes' first handlers.
				var sub []struct {
					Handle []struct {
						Handler string `json:"handler"`
					} `json:"handle"`
				}
				json.Unmarshal(h.Routes, &sub)
				for _, s := range sub {
					for _, hh := range s.Handle {
						got = append(got, hh.Handler)
					}
				}
			}
		}
	}
	want := []string{"ratelimit", "circuitbreaker", "grayroute", "headers", "subroute", "reverse_proxy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("handler order %v, want %v", got, want)
	}
}
