package api

// Cross-site protection: the content type, Origin and Host checks of
// every route.

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/httperr"
)

// checkSite protects r on route rt from cross-site use. A page on another site can make a browser send requests to a server on
// 127.0.0.1, and with DNS rebinding (its own name resolving to 127.0.0.1)
// read the answers. checkSite refuses what such pages can send:
//
//   - a POST whose content type is not the endpoint's (application/json;
//     for /v1/run also the streamed hop type): a page can send text/plain
//     or a form without asking the server first, but not JSON (415);
//   - a request with an Origin that is neither this server's own (the
//     playground's) nor one of the configured origins (Options.CORSOrigins;
//     403);
//   - on a server listening on a loopback address only, a Host that is not
//     a loopback name or address, nor the host of a configured origin: a
//     rebound name (403). Open routes (/health, /ready, the playground's
//     static files) reveal nothing and stay open to any Host, and an
//     HTTP/1.0 request without a Host (a health check) is no browser's.
//
// Programs (curl, SDKs, stage servers calling each other) send no Origin
// and name the host they dialled, so they pass.
func (s *Server) checkSite(r *http.Request, rt route) error {
	if s.loopback.Load() && !rt.open && r.Host != "" && !s.allowedHost(r.Host) {
		return httperr.Errorf(http.StatusForbidden, httperr.CodeForbiddenHost,
			"host %q is not this server's: a server on a loopback address answers only to localhost, loopback addresses and the hosts of its allowed origins (serve --cors-origins); this keeps rebound DNS names out", httperr.Short(r.Host))
	}
	if origin := r.Header.Get("Origin"); origin != "" && !s.allowedOrigin(origin, r.Host) {
		return httperr.Errorf(http.StatusForbidden, httperr.CodeForbiddenOrigin,
			"origin %q may not call this server: add it to serve --cors-origins to allow its pages", httperr.Short(origin))
	}
	if r.Method == http.MethodPost && len(rt.bodyTypes) > 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || !slices.Contains(rt.bodyTypes, mt) {
			return httperr.Errorf(http.StatusUnsupportedMediaType, httperr.CodeUnsupportedMedia,
				"content type %q is not accepted here: send %s (with curl: --json '{...}', or -H 'Content-Type: application/json')",
				httperr.Short(r.Header.Get("Content-Type")), strings.Join(rt.bodyTypes, " or "))
		}
	}
	return nil
}

// allowedHost reports whether a loopback server answers to host: a
// loopback name or address, or the host of an allowed origin.
func (s *Server) allowedHost(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	if strings.EqualFold(name, "localhost") || strings.HasSuffix(strings.ToLower(name), ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, o := range s.opts.CORSOrigins {
		if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Hostname(), name) {
			return true
		}
	}
	return false
}

// allowedOrigin reports whether pages of origin may call the server: its
// own origin (the Host it was called by), or a configured one.
func (s *Server) allowedOrigin(origin, host string) bool {
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, host) {
		return true
	}
	return slices.Contains(s.opts.CORSOrigins, "*") || slices.ContainsFunc(s.opts.CORSOrigins, func(o string) bool {
		return strings.EqualFold(strings.TrimSuffix(o, "/"), origin)
	})
}
