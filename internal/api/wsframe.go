package api

// The frame headers of a speech stream client, read as they arrive: a
// message announced longer than the session's bound is refused from its
// header, before its payload is waited for.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// errFrameTooBig is what reading a connection returns once a client's
// frame header announces a message longer than the session's bound.
var errFrameTooBig = errors.New("websocket message too big")

// guardedWriter is a ResponseWriter whose Hijack hands the WebSocket
// library a connection read through a frameGuard.
type guardedWriter struct {
	http.ResponseWriter
	limit int64
}

// Unwrap lets http.ResponseController reach the writer's own methods.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker: the bytes net/http has read ahead and
// the rest of the connection are read through a frameGuard, and the
// reader handed out holds nothing read ahead (the library reads what a
// hijack's reader holds without going through the connection).
func (w *guardedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	ahead, _ := brw.Reader.Peek(brw.Reader.Buffered())
	g := &frameGuard{Conn: c, r: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), c), scan: frameScan{limit: w.limit}}
	return g, bufio.NewReadWriter(bufio.NewReader(g), brw.Writer), nil
}

// frameGuard is a client's connection whose reads check the frame
// headers they carry: once one announces a data message longer than the
// limit, every read fails with errFrameTooBig.
type frameGuard struct {
	net.Conn
	r    io.Reader
	scan frameScan
	err  error
}

// Read implements net.Conn.
func (g *frameGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	if serr := g.scan.feed(p[:n]); serr != nil {
		g.err = serr
		return 0, serr
	}
	return n, err
}

// frameScan follows the frames of a byte stream from a WebSocket client
// (RFC 6455 section 5.2): their headers, and how much of each payload is
// still to come, which it skips.
type frameScan struct {
	limit   int64 // the longest data message allowed, in bytes
	hdr     [14]byte
	have    int   // header bytes gathered
	payload int64 // bytes of the current frame's payload still to come
	message int64 // bytes of the current data message, its frames so far
}

// feed follows b, the next bytes of the stream.
func (s *frameScan) feed(b []byte) error {
	for len(b) > 0 {
		if s.payload > 0 {
			skip := min(s.payload, int64(len(b)))
			s.payload -= skip
			b = b[skip:]
			continue
		}
		need := s.headerLen()
		k := copy(s.hdr[s.have:need], b)
		s.have += k
		b = b[k:]
		if s.have < s.headerLen() {
			continue // the header's length bytes told it is longer
		}
		if err := s.frame(); err != nil {
			return err
		}
	}
	return nil
}

// headerLen returns the length of the header being gathered, as far as
// its bytes so far tell: 2, then with its extended length and mask key.
func (s *frameScan) headerLen() int {
	if s.have < 2 {
		return 2
	}
	n := 2
	switch s.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if s.hdr[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// frame takes a complete header: it counts a data frame's payload to its
// message, refusing one past the limit.
func (s *frameScan) frame() error {
	length := int64(s.hdr[1] & 0x7f)
	switch length {
	case 126:
		length = int64(binary.BigEndian.Uint16(s.hdr[2:4]))
	case 127:
		u := binary.BigEndian.Uint64(s.hdr[2:10])
		if u > 1<<62 {
			u = 1 << 62 // past any limit; RFC 6455 forbids the top bit anyway
		}
		length = int64(u)
	}
	s.have, s.payload = 0, length
	switch opcode := s.hdr[0] & 0x0f; {
	case opcode >= 8: // a control frame: not part of a message
		return nil
	case opcode == 0: // a continuation
		s.message += length
	default:
		s.message = length
	}
	if s.message > s.limit {
		return fmt.Errorf("%w: a frame header announces %d bytes of message, more than the limit of %d", errFrameTooBig, s.message, s.limit)
	}
	return nil
}
