//go:build !linux

package api

// Whether a connection has received bytes not read yet: unknown here.

// pending reports false: where the socket cannot say, a connection's slot
// goes by its state alone.
func (c *limitConn) pending() bool { return false }
