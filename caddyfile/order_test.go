package caddyfile_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sluicegw/sluice/internal/testcaddy"
)

// TestDirectiveOrder checks, in a plain Caddyfile with the
// directives written in reverse, that the adapted route runs ratelimit
// first, then circuitbreaker, grayroute, and the standard directives, with
// reverse_proxy last: no route block needed.
func TestDirectiveOrder(t *testing.T) {
	cfg, err := testcaddy.Adapt(`{
	rulestore {
		redis redis://127.0.0.1:1
	}
}
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
