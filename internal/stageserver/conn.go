package stageserver

// The connection a call came on, which a streamed hop watches for its
// caller closing it while the hop reads nothing of it.

import (
	"context"
	"net"
	"net/http"
	"syscall"
)

type connKey struct{}

// WithConn returns ctx carrying c, the connection of the calls served
// under ctx: a server sets it in http.Server.ConnContext. Over HTTP/1.1 a
// server learns that its caller closed the connection only by reading it,
// and a streamed hop whose stage takes no input reads nothing (its input
// is full); with the connection, the hop watches it instead and ends when
// the caller is gone (on Linux, from the socket's TCP state), so a
// coordinator that dies frees its hops at once. c may wrap the connection
// it carries if it has a NetConn method, as *tls.Conn does.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// peerGoneProbe returns a func that reports whether the caller of r has
// closed its connection, or nil when that cannot be told: over HTTP/2 (its
// server sees a stream reset itself), without WithConn, or where the
// platform has no probe.
func peerGoneProbe(r *http.Request) func() bool {
	if r.ProtoMajor != 1 || !canProbePeer {
		return nil
	}
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		switch x := c.(type) {
		case syscall.Conn:
			rc, err := x.SyscallConn()
			if err != nil {
				return nil
			}
			return func() bool { return peerClosed(rc) }
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}
