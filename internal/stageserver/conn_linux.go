//go:build linux

package stageserver

// Whether a TCP connection's peer has closed it, from the socket's state.

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const canProbePeer = true

// peerClosed reports whether the peer of rc closed the connection: it sent
// its FIN (the socket waits for this side to close) or a reset, whatever
// data it sent before is still unread. A socket that is not TCP tells
// nothing; one already closed here is gone.
func peerClosed(rc syscall.RawConn) bool {
	var state uint8
	var serr error
	if err := rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		if info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); serr == nil {
			state = info.State
		}
	}); err != nil {
		return true
	}
	return serr == nil && (state == unix.BPF_TCP_CLOSE_WAIT || state == unix.BPF_TCP_CLOSE)
}
