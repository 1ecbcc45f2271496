package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/stage"
)

// LookupFunc resolves a host name to addresses, as net.Resolver.LookupHost.
type LookupFunc func(ctx context.Context, host string) ([]string, error)

// endpointMembers returns the members of remote stage d: a key per
// address, "URL ADDRESS", built by RemoteFunc.
//
// A remote stage has one replica per address its endpoints' host names
// resolve to (an IP address in the URL is its own one address), found
// again every resolve_interval (stage.Members): a Kubernetes headless
// Service, or several /etc/hosts lines, is a set of replicas. A name with
// both IPv4 and IPv6 addresses gives its IPv4 ones: "localhost" is one
// server, not two. The replica still calls the endpoint URL (its Host
// header and TLS name are the URL's), over connections to its address.
func (o *Orchestrator) endpointMembers(spec engine.Spec, d *pipeline.DeployStage) stage.Members {
	lookup := o.opts.LookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	return stage.Members{
		Interval: d.Hop.ResolveInterval,
		Resolve: func(ctx context.Context) ([]string, error) {
			return resolveEndpoints(ctx, lookup, d.Endpoints)
		},
		Build: func(key string, index int) (engine.Engine, error) {
			endpoint, addr, _ := strings.Cut(key, " ")
			spec := spec
			spec.Replica = index
			return o.opts.Remote(spec, d, endpoint, addr)
		},
	}
}

// noAddressError is the stage.ErrNoMembers of endpoints whose names all
// resolve to no address.
type noAddressError struct{ msg string }

func (e *noAddressError) Error() string        { return e.msg }
func (e *noAddressError) Is(target error) bool { return target == stage.ErrNoMembers }

// resolveEndpoints returns a member key per address of each endpoint.
func resolveEndpoints(ctx context.Context, lookup LookupFunc, endpoints []string) ([]string, error) {
	var keys, empty []string
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
			keys = append(keys, endpoint+" "+net.JoinHostPort(host, port))
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
			keys = append(keys, endpoint+" "+net.JoinHostPort(a, port))
		}
	}
	if len(keys) == 0 {
		verb := "resolves"
		if len(empty) > 1 {
			verb = "resolve"
		}
		return nil, &noAddressError{fmt.Sprintf("%s %s to no address", strings.Join(empty, ", "), verb)}
	}
	return keys, nil
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
