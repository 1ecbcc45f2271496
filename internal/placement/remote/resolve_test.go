package remote

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/pool"
)

func TestResolveEndpoints(t *testing.T) {
	hosts := map[string][]string{
		"localhost": {"::1", "127.0.0.1"},
		"v6only":    {"fd00::2", "fd00::1", "fd00::2"},
		"pods":      {"10.0.0.8", "10.0.0.7", "fd00::7"},
	}
	lookup := func(_ context.Context, host string) ([]string, error) {
		if host == "flaky" {
			return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
		}
		if a, ok := hosts[host]; ok {
			return a, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	for _, tc := range []struct {
		endpoints []string
		want      []string
		err       string // empty: no error
		none      bool   // the error means there are no members
	}{
		{[]string{"http://localhost:8080"}, []string{"http://localhost:8080 127.0.0.1:8080"}, "", false},
		{[]string{"http://v6only/"}, []string{"http://v6only/ [fd00::1]:80", "http://v6only/ [fd00::2]:80"}, "", false},
		{[]string{"https://pods", "http://10.1.1.1:9000"}, []string{"https://pods 10.0.0.7:443", "https://pods 10.0.0.8:443", "http://10.1.1.1:9000 10.1.1.1:9000"}, "", false},
		{[]string{"http://gone:1", "http://pods:1"}, []string{"http://pods:1 10.0.0.7:1", "http://pods:1 10.0.0.8:1"}, "", false},
		{[]string{"http://gone:1", "http://alsogone:1"}, nil, "gone, alsogone resolve to no address", true},
		{[]string{"http://pods:1", "http://flaky:1"}, nil, "resolve flaky (endpoint http://flaky:1)", false},
	} {
		members, err := Resolve(context.Background(), lookup, tc.endpoints)
		var got []string
		for _, m := range members {
			got = append(got, m.Endpoint+" "+m.Addr)
		}
		if tc.err == "" {
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%v: %q, %v; want %q", tc.endpoints, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, pool.ErrNoMembers) != tc.none {
			t.Errorf("%v: %v; want an error with %q (no members: %v)", tc.endpoints, err, tc.err, tc.none)
		}
	}
}
