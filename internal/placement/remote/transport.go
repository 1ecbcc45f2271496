package remote

// The HTTP client of one replica: its connections go to the member's
// address, whatever host the calls name.

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/omnistage/omnistage/internal/hop"
)

// httpClientTo returns a hop HTTP client whose connections all go to addr
// (host:port), whatever host a URL names; with addr empty, to the URL's.
func httpClientTo(addr string) *http.Client {
	c := hop.NewHTTPClient()
	if addr == "" {
		return c
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return c
}
