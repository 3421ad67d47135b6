package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// A write through sluice_status must be addressed to a name the site
// answers for, as Caddy's admin endpoint checks its Host: a page on
// another site that re-points its own name at this server (DNS
// rebinding) sends Host = Origin = its own name, which the Origin check
// alone takes for same-origin.

// siteNames is what the handler learns about its site on the first
// write: the host matchers of the routes that lead to it.
type siteNames struct {
	once  sync.Once
	hosts []caddyhttp.MatchHost
}

// writeHostError says why a write's Host is refused, or nil.
func (h *StatusHandler) writeHostError(r *http.Request) error {
	names := h.names
	if names == nil { // not provisioned (a handler built by hand)
		names = new(siteNames)
	}
	names.once.Do(func() { names.hosts = routeHosts(r, h) })
	for _, m := range names.hosts {
		if ok, _ := m.MatchWithError(r); ok {
			return nil
		}
	}
	for _, o := range h.Origins {
		if originAdmits(o, r.Host) {
			return nil
		}
	}
	if len(names.hosts) == 0 && len(h.Origins) == 0 && loopbackRequest(r) {
		return nil
	}
	switch {
	case len(names.hosts) == 0 && len(h.Origins) == 0:
		return apiError(http.StatusForbidden, "write refused: Host %q is not a name of this site, and the site has no host names; list the names writes may use in sluice_status origins, or give the site a host name", r.Host)
	default:
		return apiError(http.StatusForbidden, "write refused: Host %q is not a name of this site; list it in sluice_status origins if it is one", r.Host)
	}
}

// routeHosts finds h in the server's routes and returns the host matchers
// on the way to it. None when the site matches any host, or when h is not
// reached through the server's routes (then only origins admit writes).
func routeHosts(r *http.Request, h caddyhttp.MiddlewareHandler) []caddyhttp.MatchHost {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		return nil
	}
	if hosts, ok := findHandler(srv.Routes, h, nil); ok {
		return hosts
	}
	if srv.Errors != nil {
		if hosts, ok := findHandler(srv.Errors.Routes, h, nil); ok {
			return hosts
		}
	}
	return nil
}

func findHandler(routes caddyhttp.RouteList, target caddyhttp.MiddlewareHandler, above []caddyhttp.MatchHost) ([]caddyhttp.MatchHost, bool) {
	for _, rt := range routes {
		hosts := above
		for _, set := range rt.MatcherSets {
			for _, m := range set {
				switch mh := m.(type) {
				case *caddyhttp.MatchHost:
					hosts = append(hosts[:len(hosts):len(hosts)], *mh)
				case caddyhttp.MatchHost:
					hosts = append(hosts[:len(hosts):len(hosts)], mh)
				}
			}
		}
		for _, hd := range rt.Handlers {
			if hd == target {
				return hosts, true
			}
			sub, ok := hd.(*caddyhttp.Subroute)
			if !ok {
				continue
			}
			if found, ok := findHandler(sub.Routes, target, hosts); ok {
				return found, true
			}
			if sub.Errors != nil {
				if found, ok := findHandler(sub.Errors.Routes, target, hosts); ok {
					return found, true
				}
			}
		}
	}
	return nil, false
}

// parseOrigin reads an origins entry: host, host:port, or a URL whose
// host is taken ("https://ops.example.com").
func parseOrigin(s string) (string, error) {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", fmt.Errorf("origins: %q: want host[:port]", s)
		}
		s = u.Host
	}
	if s == "" || strings.ContainsAny(s, "/?#@ ") {
		return "", fmt.Errorf("origins: %q: want host[:port]", s)
	}
	return strings.ToLower(s), nil
}

// originAdmits compares an origins entry with a request's Host: the
// whole host:port when the entry names a port, the host name otherwise.
func originAdmits(origin, host string) bool {
	if _, _, err := net.SplitHostPort(origin); err == nil {
		return strings.EqualFold(origin, host)
	}
	return strings.EqualFold(strings.Trim(origin, "[]"), hostName(host))
}

func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// loopbackRequest: a request for localhost, 127.0.0.1 or [::1] that came
// in on a loopback address. A rebinding page cannot send it: its Host is
// its own name.
func loopbackRequest(r *http.Request) bool {
	switch strings.ToLower(hostName(r.Host)) {
	case "localhost", "127.0.0.1", "::1":
	default:
		return false
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return false
	}
	ap, err := netAddrIP(addr)
	return err == nil && ap.IsLoopback()
}

func netAddrIP(a net.Addr) (net.IP, error) {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP, nil
	case *net.UDPAddr:
		return v.IP, nil
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("not an IP: %s", host)
	}
	return ip, nil
}
