//go:build linux

package api

// Whether a connection has received bytes not read yet, from the socket.

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pending reports whether bytes that arrived on c wait to be read: a
// request under way that net/http has not begun to read.
func (c *limitConn) pending() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }) != nil {
		return false
	}
	return n > 0
}
