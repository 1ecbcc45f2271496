package stageproto

// The framing: a header line of JSON, then the data it announces.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// ProtocolError is a message that breaks the framing or the protocol: the
// connection cannot go on.
type ProtocolError struct {
	Msg string
}

func (e *ProtocolError) Error() string { return "stage protocol: " + e.Msg }

func protocolErrorf(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// Reader reads messages. It is not safe for concurrent use.
type Reader struct {
	r *bufio.Reader
}

// NewReader returns a Reader of r. A non-blocking file (a pipe of the
// runtime's poller) is read with raw system calls (pipe_linux.go).
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(pipeReader(r), 64<<10)}
}

// Read reads the next message into h (which it resets first) and returns
// its data, in a new slice that the caller owns (nil when there is none).
// At the end of the stream it returns io.EOF; a stream that ends inside a
// message is an io.ErrUnexpectedEOF, and a malformed message a
// *ProtocolError.
func (r *Reader) Read(h *Header) ([]byte, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	*h = Header{}
	if !decodeFlat(line, h) {
		*h = Header{}
		err = json.Unmarshal(line, h)
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, protocolErrorf("header %q: field %s is a JSON %s, not what the protocol gives it", short(line), te.Field, te.Value)
		}
		return nil, protocolErrorf("header %q is not a JSON object: %v", short(line), err)
	}
	if h.Type == "" {
		return nil, protocolErrorf("header %q has no type", short(line))
	}
	switch {
	case h.DataLength < 0:
		return nil, protocolErrorf("%s message announces %d bytes of data", h.Type, h.DataLength)
	case h.DataLength > MaxData:
		return nil, protocolErrorf("%s message announces %d bytes of data; the limit is %d", h.Type, h.DataLength, MaxData)
	case h.DataLength == 0:
		return nil, nil
	}
	data := make([]byte, h.DataLength)
	if _, err := io.ReadFull(r.r, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("stage protocol: %s message's data: %w", h.Type, err)
	}
	return data, nil
}

// readLine reads a header line, without its line feed.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, protocolErrorf("a header line is longer than %d bytes", MaxHeader)
	}
	if errors.Is(err, io.EOF) && len(line) > 0 {
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

// short quotes the start of a malformed header.
func short(b []byte) string {
	const max = 120
	if len(b) > max {
		return string(bytes.ToValidUTF8(b[:max], nil)) + "..."
	}
	return string(b)
}

// Writer writes messages. It is safe for concurrent use: each message is
// written whole, and flushed.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	buf []byte
	err error // the first write error; every later write returns it
}

// NewWriter returns a Writer to w. A non-blocking file (a pipe of the
// runtime's poller) is written with raw system calls (pipe_linux.go).
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(pipeWriter(w), 64<<10)}
}

// Write writes the message whose header JSON encodes v, followed by data;
// v must not set data_length, which Write adds when data is not empty.
func (w *Writer) Write(v any, data []byte) error {
	if b, ok := appendFlat(make([]byte, 0, 96), v); ok {
		return w.WriteRaw(b, data)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("stage protocol: %w", err)
	}
	return w.WriteRaw(b, data)
}

// WriteRaw writes the message whose header is the JSON object hdr,
// followed by data, the concatenation of the parts given. hdr must not
// hold data_length, which WriteRaw adds. A header or data past the
// framing's limits is a *ProtocolError, and nothing is written.
func (w *Writer) WriteRaw(hdr []byte, data ...[]byte) error {
	if len(hdr) < 2 || hdr[len(hdr)-1] != '}' {
		return errors.New("stage protocol: a header is a JSON object")
	}
	n := 0
	for _, d := range data {
		n += len(d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b := append(w.buf[:0], hdr[:len(hdr)-1]...)
	if n > 0 {
		if len(hdr) > 2 {
			b = append(b, ',')
		}
		b = append(b, `"data_length":`...)
		b = strconv.AppendInt(b, int64(n), 10)
	}
	b = append(b, '}', '\n')
	w.buf = b
	switch {
	case len(b) > MaxHeader:
		return protocolErrorf("a %d-byte header is longer than %d bytes", len(b), MaxHeader)
	case n > MaxData:
		return protocolErrorf("%d bytes of data; the limit is %d", n, MaxData)
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return err
	}
	for _, d := range data {
		if _, err := w.w.Write(d); err != nil {
			w.err = err
			return err
		}
	}
	if err := w.w.Flush(); err != nil {
		w.err = err
		return err
	}
	return nil
}
