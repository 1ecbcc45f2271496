package wyoming

// The framing: a JSON header line, then the data and the payload it
// announces, read within bounds and written whole.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/quote"
)

// ProtocolVersion is the version of the protocol the server speaks, which
// every event it writes carries: the Wyoming release that added streaming
// synthesis.
const ProtocolVersion = "1.7.0"

// maxSkip bounds the bytes an over-limit header line, data section or
// payload may have for the reader to skip them and go on; beyond it the
// connection ends.
const maxSkip = 64 << 20

// event is one Wyoming event. Data holds the header's data with the data
// section merged over it, key by key; Payload is nil when there is none.
type event struct {
	Type    string
	Data    map[string]json.RawMessage
	Payload []byte
}

// frameError is an event that cannot be read. When fatal, the bytes that
// follow cannot be framed (a length that is not a length) and the
// connection must end; otherwise the event was read to its end and the
// next one can be.
type frameError struct {
	msg   string
	fatal bool
}

func (e *frameError) Error() string { return e.msg }

func badFrame(fatal bool, format string, args ...any) *frameError {
	return &frameError{msg: fmt.Sprintf(format, args...), fatal: fatal}
}

// limits bound what the reader takes in of one event.
type limits struct {
	header, data, payload int
}

// reader reads events. It is not safe for concurrent use.
type reader struct {
	br  *bufio.Reader
	lim limits
}

func newReader(r io.Reader, lim limits) *reader {
	return &reader{br: bufio.NewReaderSize(r, lim.header), lim: lim}
}

// read returns the next event. It returns io.EOF at the end of the
// stream between events, io.ErrUnexpectedEOF inside one, a *frameError
// for an event it cannot read, and the connection's error otherwise.
// Blank lines between events are skipped.
func (r *reader) read() (event, error) {
	var line []byte
	for len(bytes.TrimSpace(line)) == 0 {
		var err error
		if line, err = r.readLine(); err != nil {
			return event{}, err
		}
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(line, &h); err != nil || h == nil {
		return event{}, badFrame(false, "the header line %s is not a JSON object", quoteBytes(line))
	}
	dataLen, err := length(h, "data_length")
	if err != nil {
		return event{}, err
	}
	payloadLen, err := length(h, "payload_length")
	if err != nil {
		return event{}, err
	}
	var typ string
	if json.Unmarshal(h["type"], &typ) != nil || typ == "" {
		// Read what the header announces, so that the next event can be.
		if err := r.skip(dataLen + payloadLen); err != nil {
			return event{}, err
		}
		return event{}, badFrame(false, "the header %s has no type (a non-empty string)", quoteBytes(line))
	}
	ev := event{Type: typ}
	if raw := h["data"]; len(raw) > 0 && string(raw) != "null" {
		if json.Unmarshal(raw, &ev.Data) != nil {
			if err := r.skip(dataLen + payloadLen); err != nil {
				return event{}, err
			}
			return event{}, badFrame(false, "%s event: the header's data is not a JSON object", typ)
		}
	}
	// A data section the reader refuses but could read past still has its
	// payload read, so that the next event can be.
	dataErr := r.readData(&ev, dataLen)
	if fe := (*frameError)(nil); dataErr != nil && (!errors.As(dataErr, &fe) || fe.fatal) {
		return event{}, dataErr
	}
	if ev.Payload, err = r.readPayload(typ, payloadLen); err != nil {
		return event{}, err
	}
	if dataErr != nil {
		return event{}, dataErr
	}
	return ev, nil
}

// readLine returns the next line without its line feed. A line longer than
// the header limit is skipped to its end, within maxSkip.
func (r *reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case err == nil:
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		for n := len(line); errors.Is(err, bufio.ErrBufferFull); n += len(line) {
			if n > maxSkip {
				return nil, badFrame(true, "a header line is longer than %d bytes", maxSkip)
			}
			line, err = r.br.ReadSlice('\n')
		}
		if err != nil {
			return nil, eofInside(err)
		}
		return nil, badFrame(false, "a header line is longer than the limit of %d bytes", r.lim.header)
	case errors.Is(err, io.EOF) && len(line) > 0:
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

// readData reads the data section of n bytes into ev.Data, merging its
// keys over the header's.
func (r *reader) readData(ev *event, n int64) error {
	if n == 0 {
		return nil
	}
	if n > int64(r.lim.data) {
		if err := r.skip(n); err != nil {
			return err
		}
		return badFrame(false, "%s event: %d bytes of data are over the limit of %d", ev.Type, n, r.lim.data)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return eofInside(err)
	}
	var section map[string]json.RawMessage
	if err := json.Unmarshal(b, &section); err != nil || section == nil {
		return badFrame(false, "%s event: its %d bytes of data are not a JSON object", ev.Type, n)
	}
	if ev.Data == nil {
		ev.Data = section
		return nil
	}
	for k, v := range section {
		ev.Data[k] = v
	}
	return nil
}

// readPayload reads a payload of n bytes; one over the limit is skipped.
func (r *reader) readPayload(typ string, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n > int64(r.lim.payload) {
		if err := r.skip(n); err != nil {
			return nil, err
		}
		return nil, badFrame(false, "%s event: a payload of %d bytes is over the limit of %d", typ, n, r.lim.payload)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return nil, eofInside(err)
	}
	return b, nil
}

// skip reads and drops n bytes, when there are at most maxSkip.
func (r *reader) skip(n int64) error {
	if n > maxSkip {
		return badFrame(true, "an event announces %d bytes; past %d the connection ends", n, maxSkip)
	}
	if _, err := io.CopyN(io.Discard, r.br, n); err != nil {
		return eofInside(err)
	}
	return nil
}

// length returns the header's field name, a length: absent or null is 0,
// and anything but a non-negative integer cannot be framed.
func length(h map[string]json.RawMessage, name string) (int64, error) {
	raw := h[name]
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, badFrame(true, "%s %s is not a length (a non-negative integer): the stream cannot be framed past it", name, quoteBytes(raw))
	}
	return n, nil
}

func eofInside(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// quoteBytes quotes the start of a client's bytes for an error message.
func quoteBytes(b []byte) string {
	return strconv.Quote(quote.Short(string(bytes.ToValidUTF8(b, []byte("\uFFFD")))))
}

// deadliner is the part of a net.Conn the writer bounds its writes with.
type deadliner interface {
	SetWriteDeadline(t time.Time) error
}

// writer writes events, each whole. It is safe for concurrent use. After a
// write fails every later one returns that error: the stream is broken.
type writer struct {
	mu      sync.Mutex
	bw      *bufio.Writer
	conn    deadliner // nil: no deadlines
	timeout time.Duration
	buf     []byte
	err     error
}

func newWriter(w io.Writer, conn deadliner, timeout time.Duration) *writer {
	return &writer{bw: bufio.NewWriterSize(w, 32<<10), conn: conn, timeout: timeout}
}

// write writes the event typ (one of the type constants) with data
// (marshalled as JSON; nil for none) and payload, and flushes unless more
// is coming (the caller flushes it with a later write). A write that takes
// longer than the timeout fails.
func (w *writer) write(typ string, data any, payload []byte, flush bool) error {
	var d []byte
	if data != nil {
		var err error
		if d, err = json.Marshal(data); err != nil {
			return fmt.Errorf("wyoming: %s event: %w", typ, err)
		}
		if string(d) == "null" || string(d) == "{}" {
			d = nil // readers merge data into a dict: no data, rather than null
		}
	}
	return w.writeRaw(typ, d, payload, flush)
}

// writeRaw is write with data already marshalled.
func (w *writer) writeRaw(typ string, data, payload []byte, flush bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b := append(w.buf[:0], `{"type":`...)
	b = strconv.AppendQuote(b, typ)
	b = append(b, `,"version":"`+ProtocolVersion+`"`...)
	if len(data) > 0 {
		b = append(b, `,"data_length":`...)
		b = strconv.AppendInt(b, int64(len(data)), 10)
	}
	if len(payload) > 0 {
		b = append(b, `,"payload_length":`...)
		b = strconv.AppendInt(b, int64(len(payload)), 10)
	}
	b = append(b, '}', '\n')
	w.buf = b
	w.deadline()
	for _, part := range [][]byte{b, data, payload} {
		if _, err := w.bw.Write(part); err != nil {
			w.err = err
			return err
		}
	}
	if flush {
		return w.flushLocked()
	}
	return nil
}

// flush sends what is written.
func (w *writer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.deadline()
	return w.flushLocked()
}

func (w *writer) flushLocked() error {
	if err := w.bw.Flush(); err != nil {
		w.err = err
		return err
	}
	return nil
}

// deadline bounds the writes about to be made; w.mu is held.
func (w *writer) deadline() {
	if w.conn != nil {
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}
