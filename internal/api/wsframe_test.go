package api

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// clientFrame returns a masked client frame of opcode whose header
// announces length bytes, with payload (which may be shorter).
func clientFrame(fin bool, opcode byte, length uint64, payload []byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	switch {
	case length < 126:
		b = append(b, 0x80|byte(length))
	case length <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(length))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, length)
	}
	b = append(b, 0, 0, 0, 0) // a zero mask key leaves the payload as it is
	return append(b, payload...)
}

// TestFrameScan: the scan follows frames however the stream is cut, and
// refuses a data message past the limit from the header that makes it so
// (a frame's, or a continuation's), not counting control frames.
func TestFrameScan(t *testing.T) {
	text := func(s string) []byte { return clientFrame(true, 1, uint64(len(s)), []byte(s)) }
	for _, tc := range []struct {
		name   string
		stream [][]byte
		bad    int // the index of the frame that is refused, or -1
	}{
		{"small messages", [][]byte{text("hello"), text(strings.Repeat("x", 300)), text("")}, -1},
		{"exactly the limit", [][]byte{text(strings.Repeat("x", 1000))}, -1},
		{"one past the limit", [][]byte{text("ok"), clientFrame(true, 1, 1001, nil)}, 1},
		{"2^62 bytes", [][]byte{clientFrame(true, 2, 1<<62, nil)}, 0},
		{"the top bit", [][]byte{clientFrame(true, 2, 1<<63|5, nil)}, 0},
		{"continuations add up", [][]byte{
			clientFrame(false, 1, 600, make([]byte, 600)),
			clientFrame(true, 9, 4, []byte("ping")), // control frames between do not count
			clientFrame(true, 0, 401, nil),
		}, 2},
		{"a new message starts over", [][]byte{
			clientFrame(false, 1, 600, make([]byte, 600)), clientFrame(true, 0, 400, make([]byte, 400)),
			clientFrame(true, 1, 1000, make([]byte, 1000)),
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var all []byte
			ends := []int{}
			for _, f := range tc.stream {
				all = append(all, f...)
				ends = append(ends, len(all))
			}
			// Cut the stream into pieces of every size from 1 byte.
			for piece := 1; piece <= len(all); piece++ {
				s := frameScan{limit: 1000}
				fed, failedAt := 0, -1
				for fed < len(all) {
					n := min(piece, len(all)-fed)
					err := s.feed(all[fed : fed+n])
					fed += n
					if err != nil {
						if !errors.Is(err, errFrameTooBig) {
							t.Fatalf("pieces of %d: %v", piece, err)
						}
						failedAt = fed
						break
					}
				}
				switch {
				case tc.bad < 0 && failedAt >= 0:
					t.Fatalf("pieces of %d: refused after %d bytes", piece, failedAt)
				case tc.bad >= 0 && failedAt < 0:
					t.Fatalf("pieces of %d: not refused", piece)
				case tc.bad >= 0:
					// Refused within the piece that completed the bad header.
					start := 0
					if tc.bad > 0 {
						start = ends[tc.bad-1]
					}
					if failedAt <= start || failedAt > ends[tc.bad] || failedAt-piece > start+14 {
						t.Fatalf("pieces of %d: refused after %d bytes, the bad frame is [%d, %d)", piece, failedAt, start, ends[tc.bad])
					}
				}
			}
		})
	}
}

// TestSpeechStreamHugeFrame: a frame header announcing 2^62 bytes gets
// an error event and status 1009 at once, though its payload never comes
// and the idle timeout is a minute; one that fits is read as ever.
func TestSpeechStreamHugeFrame(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil), opts: Options{SpeechStream: SpeechStreamLimits{Idle: time.Minute}}})
	conn, br := rawWebSocket(t, f.url)
	// The header comes in the same packet as a good event, before it has
	// been read: through the bytes read ahead of the handshake's end too.
	cfg := `{"type":"session.config","response_format":"pcm"}`
	_, err := conn.Write(append(clientFrame(true, 1, uint64(len(cfg)), []byte(cfg)), clientFrame(true, 2, 1<<62, nil)...))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	op, payload := readServerFrame(t, br)
	if op != 1 || !strings.Contains(string(payload), `"code":"input_too_large"`) {
		t.Fatalf("got opcode %d %q, want an input_too_large error event", op, payload)
	}
	op, payload = readServerFrame(t, br)
	if op != 8 || len(payload) < 2 || websocket.StatusCode(binary.BigEndian.Uint16(payload)) != websocket.StatusMessageTooBig {
		t.Fatalf("got opcode %d %q, want a close frame with 1009", op, payload)
	}
}

// rawWebSocket opens a WebSocket to the speech stream of the server at
// base by hand, and returns the connection and a reader past the
// handshake's answer.
func rawWebSocket(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(wsDeadline))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		speechStreamPath, strings.TrimPrefix(base, "http://"))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	return conn, br
}

// readServerFrame reads one unmasked frame of the server.
func readServerFrame(t *testing.T, br *bufio.Reader) (opcode byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, _ = io.ReadFull(br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, _ = io.ReadFull(br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatalf("reading a frame's payload: %v", err)
	}
	return h[0] & 0x0f, payload
}
