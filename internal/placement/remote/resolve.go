package remote

// Resolution of a remote stage's endpoints into its members: one per
// address of each endpoint's host name.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/pool"
)

// Member is one replica of a remote stage: the stage server at Endpoint
// (a base URL), reached at Addr (host:port), one of the addresses the
// endpoint's host name resolves to.
type Member struct {
	Endpoint string
	Addr     string
}

// String names the member in logs: "http://vocoder:8080 (10.0.0.7:8080)".
func (m Member) String() string { return m.Endpoint + " (" + m.Addr + ")" }

// noAddressError is the pool.ErrNoMembers of endpoints whose names all
// resolve to no address.
type noAddressError struct{ msg string }

func (e *noAddressError) Error() string        { return e.msg }
func (e *noAddressError) Is(target error) bool { return target == pool.ErrNoMembers }

// Resolve returns a member per address of each endpoint (see the package
// documentation). Endpoints whose names resolve to no address give no
// member; when none gives one, the error wraps pool.ErrNoMembers. A
// failed lookup is an error of its own.
func Resolve(ctx context.Context, lookup LookupFunc, endpoints []string) ([]Member, error) {
	var members []Member
	var empty []string
	for _, endpoint := range endpoints {
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		host := u.Hostname()
		if net.ParseIP(host) != nil {
			members = append(members, Member{Endpoint: endpoint, Addr: net.JoinHostPort(host, port)})
			continue
		}
		addrs, err := lookup(ctx, host)
		var dnsErr *net.DNSError
		if err != nil && !(errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
			return nil, fmt.Errorf("resolve %s (endpoint %s): %w", host, endpoint, err)
		}
		addrs = oneFamily(addrs)
		if len(addrs) == 0 {
			empty = append(empty, host)
		}
		for _, a := range addrs {
			members = append(members, Member{Endpoint: endpoint, Addr: net.JoinHostPort(a, port)})
		}
	}
	if len(members) == 0 {
		verb := "resolves"
		if len(empty) > 1 {
			verb = "resolve"
		}
		return nil, &noAddressError{fmt.Sprintf("%s %s to no address", strings.Join(empty, ", "), verb)}
	}
	return members, nil
}

// oneFamily returns the IPv4 addresses of addrs if it has any, else its
// IPv6 ones, dropping anything that is not an IP address.
func oneFamily(addrs []string) []string {
	var v4, v6 []string
	for _, a := range addrs {
		ip := net.ParseIP(a)
		switch {
		case ip == nil:
		case ip.To4() != nil:
			v4 = append(v4, a)
		default:
			v6 = append(v6, a)
		}
	}
	if len(v4) > 0 {
		return slices.Compact(slices.Sorted(slices.Values(v4)))
	}
	return slices.Compact(slices.Sorted(slices.Values(v6)))
}
