package api

// Cross-site protection: the content type, Origin and Host checks of
// every route.

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/quote"
)

// checkSite protects r on route rt from cross-site use. A page on another
// site can make a browser send requests to a server it can reach (on
// 127.0.0.1, on the LAN), and with DNS rebinding (its own name resolving
// to the server's address) read the answers. checkSite refuses what such
// pages can send:
//
//   - a Host that is none of the names the server answers to (hostSet:
//     addresses, loopback names, its host name, serve --allowed-hosts and
//     the hosts of --cors-origins): a rebound name (403), whatever address
//     the server listens on. Open routes (/health, /ready, the
//     playground's static files) reveal nothing and stay open to any Host,
//     and an HTTP/1.0 request without a Host (a health check) is no
//     browser's;
//   - a request with an Origin that is neither this server's own (the
//     playground's) nor one of the configured origins (Options.CORSOrigins;
//     403);
//   - a POST whose content type is not the endpoint's (application/json;
//     for /v1/run also the streamed hop type): a page can send text/plain
//     or a form without asking the server first, but not JSON (415).
//
// Programs (curl, SDKs, stage servers calling each other) send no Origin
// and name the host they dialled, which the server answers to when it is
// its address, its name or an allowed host.
func (s *Server) checkSite(r *http.Request, rt route) error {
	if !rt.open && r.Host != "" && !s.hosts.allows(r.Host) {
		return httperr.Errorf(http.StatusForbidden, httperr.CodeForbiddenHost,
			"host %q is not one this server answers to: it answers to its addresses, localhost, its host name and the hosts of serve --allowed-hosts and --cors-origins; add the name to --allowed-hosts (this keeps rebound DNS names out)", quote.Short(r.Host))
	}
	if origin := r.Header.Get("Origin"); origin != "" && !s.allowedOrigin(origin, r.Host) {
		return httperr.Errorf(http.StatusForbidden, httperr.CodeForbiddenOrigin,
			"origin %q may not call this server: add it to serve --cors-origins to allow its pages", quote.Short(origin))
	}
	if r.Method == http.MethodPost && len(rt.bodyTypes) > 0 {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || !slices.Contains(rt.bodyTypes, mt) {
			return httperr.Errorf(http.StatusUnsupportedMediaType, httperr.CodeUnsupportedMedia,
				"content type %q is not accepted here: send %s (with curl: --json '{...}', or -H 'Content-Type: application/json')",
				quote.Short(r.Header.Get("Content-Type")), strings.Join(rt.bodyTypes, " or "))
		}
	}
	return nil
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
