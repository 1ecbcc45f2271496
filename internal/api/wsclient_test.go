package api

// A client of the speech stream for tests: it sends events and reads the
// server's, JSON or audio, each within a deadline.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/engine"
)

// wsDeadline bounds each read and write of a test client: a failure, not
// a measure.
const wsDeadline = 30 * time.Second

type wsClient struct {
	t    testing.TB
	conn *websocket.Conn
}

// wsURL is the speech stream's URL on the server at base (http://...).
func wsURL(base string) string {
	return "ws" + strings.TrimPrefix(base, "http") + speechStreamPath
}

// dialWS opens a session at the server at base; it closes when the test
// ends.
func dialWS(t testing.TB, base string, opts *websocket.DialOptions) *wsClient {
	t.Helper()
	c, err := tryDialWS(base, opts)
	if err != nil {
		t.Fatalf("dialing %s: %v", wsURL(base), err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(-1)
	return &wsClient{t: t, conn: c}
}

func tryDialWS(base string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(base), opts)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return c, err
}

// send sends v as a JSON text message.
func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(websocket.MessageText, b)
}

func (c *wsClient) sendRaw(typ websocket.MessageType, b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	if err := c.conn.Write(ctx, typ, b); err != nil {
		c.t.Fatalf("sending %s: %v", b, err)
	}
}

// event sends a client event of typ, with the fields kv (name, value pairs).
func (c *wsClient) event(typ string, kv ...any) {
	c.t.Helper()
	m := map[string]any{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	c.send(m)
}

// wsMsg is one message of the server: an event (its type and JSON) or
// audio.
type wsMsg struct {
	typ   string // the event's type, or "" for audio
	raw   json.RawMessage
	audio []byte
	at    time.Time // when it was read
}

// decode decodes the event into v.
func (m wsMsg) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(m.raw, v); err != nil {
		t.Fatalf("decoding %s: %v", m.raw, err)
	}
}

// recv reads the next message.
func (c *wsClient) recv() wsMsg {
	c.t.Helper()
	m, err := c.tryRecv()
	if err != nil {
		c.t.Fatalf("reading: %v", err)
	}
	return m
}

func (c *wsClient) tryRecv() (wsMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	typ, b, err := c.conn.Read(ctx)
	if err != nil {
		return wsMsg{}, err
	}
	m := wsMsg{at: time.Now()}
	if typ == websocket.MessageBinary {
		m.audio = b
		return m, nil
	}
	var ev struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return wsMsg{}, err
	}
	m.typ, m.raw = ev.Type, b
	return m, nil
}

// until reads messages until an event of one of types, and returns them
// all, that one last.
func (c *wsClient) until(types ...string) []wsMsg {
	c.t.Helper()
	var out []wsMsg
	for {
		m := c.recv()
		out = append(out, m)
		for _, t := range types {
			if m.typ == t {
				return out
			}
		}
	}
}

// closed reads until the connection closes and returns its close status,
// failing if audio or an event other than skip comes first.
func (c *wsClient) closed(skip ...string) websocket.StatusCode {
	c.t.Helper()
	for {
		m, err := c.tryRecv()
		if err != nil {
			if s := websocket.CloseStatus(err); s != -1 {
				return s
			}
			c.t.Fatalf("reading to the close: %v", err)
		}
		if m.typ == "" || !containsStr(skip, m.typ) {
			c.t.Fatalf("before the close: %s (%d bytes of audio)", m.raw, len(m.audio))
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// wantErrorEvent checks that m is an error event with code and a message
// holding msg.
func wantErrorEvent(t testing.TB, m wsMsg, code, msg string) {
	t.Helper()
	var e wsError
	if m.typ != evError {
		t.Fatalf("got %s (%d bytes of audio), want an error %s", m.raw, len(m.audio), code)
	}
	m.decode(t, &e)
	if e.Code != code || !strings.Contains(e.Message, msg) {
		t.Errorf("error %+v, want code %s with %q", e, code, msg)
	}
}

// heardUtterance is what a client got of one utterance.
type heardUtterance struct {
	starts    []wsAudioStart
	dones     []wsAudioDone
	words     []wsWords
	sentences [][]byte // each sentence's audio
	end       wsMsg    // session.done or audio.cancelled
	errs      []wsMsg  // error events
	msgs      []wsMsg
}

// audio returns the utterance's audio, the sentences' back to back.
func (h *heardUtterance) audio() []byte { return bytes.Join(h.sentences, nil) }

// allWords returns the words of every word_timestamps event, in order.
func (h *heardUtterance) allWords() []engine.Word {
	var out []engine.Word
	for _, w := range h.words {
		out = append(out, w.Words...)
	}
	return out
}

// utterance reads one utterance's events, checking their order, until its
// session.done or audio.cancelled, after the messages of it already read;
// an error event fails the test.
func (c *wsClient) utterance(read ...wsMsg) *heardUtterance {
	c.t.Helper()
	h := c.failingUtterance(read...)
	for _, e := range h.errs {
		c.t.Errorf("utterance: %s", e.raw)
	}
	return h
}

// failingUtterance is utterance, error events allowed.
func (c *wsClient) failingUtterance(read ...wsMsg) *heardUtterance {
	c.t.Helper()
	h := &heardUtterance{}
	for _, m := range read {
		if h.add(c.t, m) {
			return h
		}
	}
	for !h.add(c.t, c.recv()) {
	}
	return h
}

// readUtterance reads messages until one that ends an utterance
// (session.done or audio.cancelled) or a failure, without checking them:
// for a goroutine other than the test's.
func (c *wsClient) readUtterance() []wsMsg {
	var out []wsMsg
	for {
		m, err := c.tryRecv()
		if err != nil {
			return out
		}
		out = append(out, m)
		if m.typ == evSessionDone || m.typ == evCancelled {
			return out
		}
	}
}

// add takes one message of the utterance; it reports whether it ended it.
func (h *heardUtterance) add(t testing.TB, m wsMsg) bool {
	t.Helper()
	h.msgs = append(h.msgs, m)
	open := len(h.starts) > len(h.dones)
	switch m.typ {
	case "":
		if !open {
			t.Fatalf("%d bytes of audio outside a sentence", len(m.audio))
		}
		h.sentences[len(h.sentences)-1] = append(h.sentences[len(h.sentences)-1], m.audio...)
	case evAudioStart:
		if open {
			t.Fatalf("audio.start inside a sentence: %s", m.raw)
		}
		var s wsAudioStart
		m.decode(t, &s)
		h.starts = append(h.starts, s)
		h.sentences = append(h.sentences, nil)
	case evAudioDone:
		var d wsAudioDone
		m.decode(t, &d)
		if !open || d.SentenceIndex != h.starts[len(h.starts)-1].SentenceIndex {
			t.Fatalf("audio.done %s without its audio.start", m.raw)
		}
		if got := int64(len(h.sentences[len(h.sentences)-1])); got != d.TotalBytes {
			t.Errorf("sentence %d: %d bytes came, audio.done says %d", d.SentenceIndex, got, d.TotalBytes)
		}
		h.dones = append(h.dones, d)
	case evWords:
		var w wsWords
		m.decode(t, &w)
		h.words = append(h.words, w)
	case evSessionDone, evCancelled:
		h.end = m
		return true
	case evError:
		h.errs = append(h.errs, m)
	default:
		t.Fatalf("unexpected event %s", m.raw)
	}
	return false
}
