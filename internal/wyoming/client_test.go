package wyoming

// A Wyoming client written from the protocol's description, apart from
// the server's own framing, so that the tests check the server against
// the protocol rather than against itself.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// clientTimeout bounds each read of a test client.
const clientTimeout = 20 * time.Second

// client is one test connection.
type client struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

// wev is an event as the client reads it.
type wev struct {
	Type    string
	Version string
	Data    map[string]any
	Payload []byte
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// send writes an event with its data in a data section, as the reference
// library does.
func (c *client) send(typ string, data map[string]any) {
	c.t.Helper()
	hdr := map[string]any{"type": typ, "version": "1.7.0"}
	var section []byte
	if data != nil {
		var err error
		if section, err = json.Marshal(data); err != nil {
			c.t.Fatal(err)
		}
		hdr["data_length"] = len(section)
	}
	line, err := json.Marshal(hdr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.raw(append(append(line, '\n'), section...))
}

// sendInline writes an event with its data in the header line.
func (c *client) sendInline(typ string, data map[string]any) {
	c.t.Helper()
	line, err := json.Marshal(map[string]any{"type": typ, "data": data})
	if err != nil {
		c.t.Fatal(err)
	}
	c.raw(append(line, '\n'))
}

func (c *client) raw(b []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// read reads the next event, or returns the connection's error (io.EOF
// once the server has closed it).
func (c *client) read() (wev, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(clientTimeout))
	line, err := c.br.ReadBytes('\n')
	if err != nil {
		return wev{}, err
	}
	var h struct {
		Type          string         `json:"type"`
		Version       string         `json:"version"`
		Data          map[string]any `json:"data"`
		DataLength    int            `json:"data_length"`
		PayloadLength int            `json:"payload_length"`
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return wev{}, fmt.Errorf("header %q: %w", line, err)
	}
	ev := wev{Type: h.Type, Version: h.Version, Data: h.Data}
	if ev.Data == nil {
		ev.Data = map[string]any{}
	}
	if h.DataLength > 0 {
		b := make([]byte, h.DataLength)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return wev{}, err
		}
		var more map[string]any
		if err := json.Unmarshal(b, &more); err != nil {
			return wev{}, fmt.Errorf("%s data %q: %w", h.Type, b, err)
		}
		for k, v := range more {
			ev.Data[k] = v
		}
	}
	if h.PayloadLength > 0 {
		ev.Payload = make([]byte, h.PayloadLength)
		if _, err := io.ReadFull(c.br, ev.Payload); err != nil {
			return wev{}, err
		}
	}
	return ev, nil
}

// next reads the next event, failing the test on any error.
func (c *client) next() wev {
	c.t.Helper()
	ev, err := c.read()
	if err != nil {
		c.t.Fatalf("reading an event: %v", err)
	}
	if ev.Version == "" {
		c.t.Errorf("%s event without a version", ev.Type)
	}
	return ev
}

// expect reads the next event and fails the test unless it is typ.
func (c *client) expect(typ string) wev {
	c.t.Helper()
	ev := c.next()
	if ev.Type != typ {
		c.t.Fatalf("got a %s event %v; want %s", ev.Type, ev.Data, typ)
	}
	return ev
}

// expectError reads an error event with code.
func (c *client) expectError(code string) wev {
	c.t.Helper()
	ev := c.expect("error")
	if ev.Data["code"] != code {
		c.t.Fatalf("error %v; want code %s", ev.Data, code)
	}
	if s, _ := ev.Data["text"].(string); s == "" {
		c.t.Errorf("error %v has no text", ev.Data)
	}
	return ev
}

// expectClosed reads until the server closes the connection, failing the
// test if it sends another event first.
func (c *client) expectClosed() {
	c.t.Helper()
	ev, err := c.read()
	var ne net.Error
	switch {
	case err == nil:
		c.t.Fatalf("got a %s event %v; want the connection closed", ev.Type, ev.Data)
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatal("the connection stayed open")
	}
}

// heard is what a client heard of one synthesis: each audio stream
// (audio-start to audio-stop) in turn.
type heard struct {
	rate    int
	streams [][]int16
	chunks  int
}

// readAudio reads audio events until until's type (audio-stop for a
// synthesize, synthesize-stopped for a stream), checking each event's
// format and timestamps; it returns what it heard.
func (c *client) readAudio(until string) heard {
	c.t.Helper()
	var a heard
	open := false
	var ms float64
	for {
		ev := c.next()
		switch ev.Type {
		case "audio-start":
			if open {
				c.t.Fatal("audio-start inside an audio stream")
			}
			open, ms = true, 0
			a.rate = c.checkFormat(ev)
			a.streams = append(a.streams, nil)
		case "audio-chunk":
			if !open {
				c.t.Fatal("audio-chunk outside an audio stream")
			}
			if rate := c.checkFormat(ev); rate != a.rate {
				c.t.Fatalf("chunk at %d Hz in a stream at %d", rate, a.rate)
			}
			if ts, _ := ev.Data["timestamp"].(float64); ts != ms {
				c.t.Fatalf("chunk timestamp %v; want %v (ms of audio before it)", ev.Data["timestamp"], ms)
			}
			if len(ev.Payload)%2 != 0 || len(ev.Payload) == 0 || len(ev.Payload)/2 > a.rate/10 {
				c.t.Fatalf("chunk of %d bytes: want an even number, of at most 100 ms", len(ev.Payload))
			}
			n := len(a.streams) - 1
			for i := 0; i < len(ev.Payload); i += 2 {
				a.streams[n] = append(a.streams[n], int16(binary.LittleEndian.Uint16(ev.Payload[i:])))
			}
			ms = float64(len(a.streams[n]) * 1000 / a.rate)
			a.chunks++
		case "audio-stop":
			open = false
			if until == "audio-stop" {
				return a
			}
		case until:
			if open {
				c.t.Fatalf("%s inside an audio stream", until)
			}
			return a
		default:
			c.t.Fatalf("unexpected %s event %v while reading audio", ev.Type, ev.Data)
		}
	}
}

// checkFormat checks an audio event's width and channels and returns its
// rate.
func (c *client) checkFormat(ev wev) int {
	c.t.Helper()
	rate, _ := ev.Data["rate"].(float64)
	if ev.Data["width"] != 2.0 || ev.Data["channels"] != 1.0 || rate <= 0 {
		c.t.Fatalf("%s format %v: want a rate, width 2, channels 1", ev.Type, ev.Data)
	}
	return int(rate)
}

// joined returns every stream's samples one after the other.
func (a heard) joined() []int16 {
	var all []int16
	for _, s := range a.streams {
		all = append(all, s...)
	}
	return all
}
