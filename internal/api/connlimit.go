package api

// The bound on the connections open at once, and which connection gives
// up its slot to a new one.

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener bounds the connections open at once. When max are open,
// a new connection is accepted by closing one that holds a slot without
// using it, in this order: the one silent the longest (connected, nothing
// sent: a socket that never made a request), else the one idle the
// longest (kept alive after a request). A connection is closed only after
// evictGrace without a byte, and never with bytes of a request read or
// waiting to be read, whatever its state: a client is never cut after its
// request was sent, nor in the moment between its connect (or its last
// answer) and its request. When no connection may go, the new one waits.
// Near the limit (nearLimit), answers close their connections, so that no
// client is left to reuse one that is about to go. The server reports the
// connections' states through track (http.Server.ConnState).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	near      int // open connections from which answers close theirs
	closed    chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	spare map[*limitConn]spareConn // idle or new connections, evictable
}

// spareConn is a connection that holds a slot without a request under way.
type spareConn struct {
	idle  bool // kept alive after a request (else: new, nothing read yet)
	since time.Time
	reads int64 // the connection's reads when it became spare
}

// evictGrace is how long a connection must have sent nothing before it
// may give up its slot.
const evictGrace = 250 * time.Millisecond

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, max), near: max - max/4,
		closed: make(chan struct{}), spare: map[*limitConn]spareConn{}}
}

// nearLimit reports whether three quarters of the slots are taken.
func (l *limitListener) nearLimit() bool { return len(l.sem) >= l.near }

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: l.release}, nil
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		default:
		}
		if victim := l.evictable(); victim != nil {
			victim.Close() // its slot is free when Close returns
			continue
		}
		// Every connection is busy: wait for a slot, looking again now and
		// then, since a connection may go idle meanwhile.
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: l.release}, nil
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		case <-time.After(evictPoll):
		}
	}
}

// evictPoll is how often a new connection waiting for a slot looks again
// for one to evict.
const evictPoll = 50 * time.Millisecond

// evictable returns the connection to close for a new one: the longest
// silent, else the longest idle, of those quiet for evictGrace with no
// request bytes read or waiting; nil when there is none.
func (l *limitListener) evictable() *limitConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	quiet := time.Now().Add(-evictGrace)
	var best *limitConn
	var bestS spareConn
	for c, s := range l.spare {
		if best != nil && (s.idle && !bestS.idle || s.idle == bestS.idle && !s.since.Before(bestS.since)) {
			continue
		}
		if s.since.After(quiet) || c.reads.Load() != s.reads || c.pending() {
			continue
		}
		best, bestS = c, s
	}
	delete(l.spare, best)
	return best
}

func (l *limitListener) release(c *limitConn) {
	l.mu.Lock()
	delete(l.spare, c)
	l.mu.Unlock()
	<-l.sem
}

// track is http.Server.ConnState: it notes which connections hold a slot
// without a request under way. A hijacked connection (a speech stream
// session) gives its slot back at once: sessions are bounded on their own
// (SpeechStreamLimits.MaxSessions), and would otherwise hold every slot
// with no HTTP request under way and none to evict.
func (l *limitListener) track(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitConn)
	if !ok {
		return
	}
	if state == http.StateHijacked {
		c.once.Do(func() { c.release(c) })
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew, http.StateIdle:
		l.spare[c] = spareConn{idle: state == http.StateIdle, since: time.Now(), reads: c.reads.Load()}
	default:
		delete(l.spare, c)
	}
}

// Close implements net.Listener.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func(*limitConn)
	reads   atomic.Int64 // reads that returned bytes
}

// Read implements net.Conn, counting the reads that return bytes.
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.reads.Add(1)
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.release(c) })
	return err
}

// CloseWrite lets the server half-close TCP connections as it does without
// the wrapper.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
