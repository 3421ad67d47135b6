package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(StatusHandler{})
}

// StatusHandler serves the status page and the read part of the admin API
// (GET /sluice/...) on an ordinary site, so it can sit behind the site's
// own authentication (basic_auth, forward_auth) instead of the admin
// endpoint. Requests are expected at /sluice/...: mount it with `handle
// /sluice/*`, or under a prefix with `handle_path /prefix/*`. Writes (PUT,
// PATCH, DELETE, POST actions) are refused unless AllowWrites is set.
//
// Caddyfile:
//
//	sluice_status [allow_writes] {
//		origins <host[:port]>...
//	}
type StatusHandler struct {
	// AllowWrites also serves the admin API's writes: rule PUT, PATCH,
	// DELETE, rollback and the POST actions (breaker overrides). A write
	// is taken only when its Host is one of the site's host names (the
	// host matchers of the routes leading to this handler) or in Origins;
	// on a site with neither, only localhost, 127.0.0.1 and [::1] on a
	// loopback address. A write whose Origin is another site is refused
	// even then.
	AllowWrites bool `json:"allow_writes,omitempty"`

	// Origins are further hosts writes may be addressed to, as
	// host[:port] (a URL's host is taken): with a port, Host must match
	// it exactly; without, any port. Needed on a site that answers any
	// host (":8443", "http://").
	Origins []string `json:"origins,omitempty"`

	names *siteNames
}

// Provision normalizes Origins.
func (h *StatusHandler) Provision(caddy.Context) error {
	h.names = new(siteNames)
	for i, o := range h.Origins {
		n, err := parseOrigin(o)
		if err != nil {
			return fmt.Errorf("sluice_status: %w", err)
		}
		h.Origins[i] = n
	}
	return nil
}

// Validate refuses origins without allow_writes: they only admit writes.
func (h *StatusHandler) Validate() error {
	if len(h.Origins) > 0 && !h.AllowWrites {
		return errors.New("sluice_status: origins admit writes, which are off: add allow_writes, or remove origins")
	}
	return nil
}

// CaddyModule returns the Caddy module information.
func (StatusHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.sluice_status",
		New: func() caddy.Module { return new(StatusHandler) },
	}
}

// writesHeader tells the page whether this server takes writes.
const writesHeader = "Sluice-Status-Writes"

// ServeHTTP serves /sluice/ui/... and /sluice/...; anything else is 404.
func (h *StatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	w.Header().Set(writesHeader, map[bool]string{true: "on", false: "off"}[h.AllowWrites])
	if r.URL.Path == "/sluice/ui" {
		http.Redirect(w, r, "ui/", http.StatusMovedPermanently)
		return nil
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	var hostErr error
	if write && h.AllowWrites {
		hostErr = h.writeHostError(r)
	}
	var err error
	switch {
	case !strings.HasPrefix(r.URL.Path, "/sluice/"):
		err = notFound("sluice_status serves /sluice/ui/ and /sluice/...: mount it at /sluice/* (or handle_path a prefix)")
	case write && !h.AllowWrites:
		err = apiError(http.StatusForbidden, "writes are off on this site (sluice_status without allow_writes); read-only")
	case hostErr != nil:
		err = hostErr
	case write && crossSite(r):
		err = apiError(http.StatusForbidden, "write refused: the request comes from another site")
	case strings.HasPrefix(r.URL.Path, "/sluice/ui/"):
		err = serveUI(w, r)
	default:
		err = serveAdmin(w, r)
	}
	if err != nil {
		writeAPIError(w, err)
	}
	return nil
}

// crossSite reports a browser request sent by a page of another origin:
// its Sec-Fetch-Site says so, or its Origin names another host. Clients
// that send neither (curl, the CLI) are not browsers acting for a user.
func crossSite(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// writeAPIError answers as Caddy's admin endpoint does: a JSON error.
func writeAPIError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var ae caddy.APIError
	if errors.As(err, &ae) {
		if ae.HTTPStatus != 0 {
			status = ae.HTTPStatus
		}
		if ae.Err != nil {
			err = ae.Err
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// UnmarshalCaddyfile reads `sluice_status [allow_writes] { origins ... }`.
func (h *StatusHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextArg() {
		if d.Val() != "allow_writes" {
			return d.Errf("sluice_status: unknown argument %q (want allow_writes)", d.Val())
		}
		h.AllowWrites = true
	}
	for d.NextBlock(0) {
		if d.Val() != "origins" {
			return d.Errf("sluice_status: unknown subdirective %q (want origins)", d.Val())
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Err("sluice_status: origins needs at least one host[:port]")
		}
		for _, a := range args {
			if _, err := parseOrigin(a); err != nil {
				return d.Errf("sluice_status: %v", err)
			}
		}
		h.Origins = append(h.Origins, args...)
	}
	return nil
}

// ParseStatusCaddyfile is the sluice_status directive's parser.
func ParseStatusCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	sh := new(StatusHandler)
	err := sh.UnmarshalCaddyfile(h.Dispenser)
	return sh, err
}

var (
	_ caddyhttp.MiddlewareHandler = (*StatusHandler)(nil)
	_ caddy.Provisioner           = (*StatusHandler)(nil)
	_ caddy.Validator             = (*StatusHandler)(nil)
	_ caddyfile.Unmarshaler       = (*StatusHandler)(nil)
)
