package api

// The names a server answers to: the Host check that keeps rebound DNS
// names out.

import (
	"net"
	"net/url"
	"os"
	"strings"
)

// hostSet is the names a server answers to (checkSite): any IP address,
// loopback names (localhost, *.localhost), this machine's host name, the
// allowed hosts (Options.AllowedHosts: names, ".example.com" or
// "*.example.com" for a domain's names, or "*" for any host) and the hosts
// of the allowed web origins. A page whose own name was rebound to this
// server's address names that rebound name, which is in none of them.
type hostSet struct {
	any      bool
	names    map[string]bool // lower case, no trailing dot
	suffixes []string        // ".example.com"
}

// newHostSet returns the set of allowed and the hosts of origins, with
// this machine's host name.
func newHostSet(allowed, origins []string) *hostSet {
	h := &hostSet{names: map[string]bool{}}
	if name, err := os.Hostname(); err == nil && name != "" {
		h.names[hostName(name)] = true
	}
	for _, a := range allowed {
		a = hostName(a)
		switch {
		case a == "*":
			h.any = true
		case strings.HasPrefix(a, "*."):
			h.suffixes = append(h.suffixes, a[1:])
		case strings.HasPrefix(a, "."):
			h.suffixes = append(h.suffixes, a)
		case a != "":
			h.names[a] = true
		}
	}
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil && u.Hostname() != "" {
			h.names[hostName(u.Hostname())] = true
		}
	}
	return h
}

// hostName is a Host header's or a setting's name in the set's form: its
// port, brackets and trailing dot dropped, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
}

// allows reports whether the server answers to host, a Host header.
func (h *hostSet) allows(host string) bool {
	name := hostName(host)
	switch {
	case h.any || h.names[name]:
		return true
	case net.ParseIP(name) != nil:
		// An address: no DNS name was rebound to reach it.
		return true
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return true
	}
	for _, s := range h.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
