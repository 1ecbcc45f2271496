package payload

// StreamWriter: writing a payload stream, one Write per frame.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/omnistage/omnistage/internal/engine"
)

// A StreamWriter writes one payload stream: Header, any number of Data,
// then End or Fail. Each call writes its frame with one Write call (the
// first also writes the preamble), so a writer that flushes after each
// Write sends every frame as soon as it is made. Calls out of that order,
// an envelope or chunk that a reader would refuse, and a failed Write are
// errors that are not *Error (bugs, or a broken connection); after a failed
// Write every call returns that error. A frame larger than the codec's
// MaxSize is an *Error with CodeTooLarge and is not written. A
// StreamWriter is not safe for concurrent use.
type StreamWriter struct {
	c        *Codec
	w        io.Writer
	preamble [preambleLen]byte
	seal     *sealer // nil without a key
	state    streamState
	kind     engine.Kind // of the data frames so far
	frames   int         // frames written
	err      error       // a failed Write
}

// NewStreamWriter returns a writer of a stream to w, signed with the
// newest key of the codec's ring when it has one, issued now, with a new
// random nonce. It writes nothing until Header.
func (c *Codec) NewStreamWriter(w io.Writer) *StreamWriter {
	s := &StreamWriter{c: c, w: w}
	var signer *macer
	if r := c.ring.Load(); r != nil {
		signer = r.signer()
	}
	stamped := c.appendStamp(append(s.preamble[:0], streamMagic...), StreamVersion, signer)
	rand.Read(s.preamble[len(stamped):]) // never fails: it crashes the program instead
	if signer != nil {
		s.seal = signer.sealer(streamKeyInfo, s.preamble[:])
	}
	return s
}

// Header writes the preamble and the header frame, in one Write: kind is
// FrameHandOff or FrameResult, and e is the envelope of the hand-off
// without its data (its Data and Carried are empty; for FrameResult, To
// equals From). The data frames that follow are the output of stage
// e.From. e is not modified.
func (s *StreamWriter) Header(kind FrameKind, e *Envelope) error {
	if err := s.ready(beforeHeader, "Header"); err != nil {
		return err
	}
	if e == nil {
		return errors.New("payload: cannot write a stream header without an envelope")
	}
	if err := headerProblem(kind, e); err != nil {
		return fmt.Errorf("payload: cannot write an invalid stream header: %s", err.Message)
	}
	err := s.frame(kind, 256+len(e.Prompt.Text)+len(e.Trace)+len(e.Params)*64, func(b []byte) ([]byte, error) {
		return encodeMap(envelopeSchema, b, e)
	})
	if err == nil {
		s.state = inData
	}
	return err
}

// Data writes a data frame holding c, a valid chunk of the same kind as the
// chunks written before it. c is not modified.
func (s *StreamWriter) Data(c *engine.Chunk) error {
	if err := s.ready(inData, "Data"); err != nil {
		return err
	}
	if c == nil {
		return errors.New("payload: cannot write a nil chunk")
	}
	if p := chunkProblem(c); p != "" {
		return fmt.Errorf("payload: cannot write an invalid chunk: %s", p)
	}
	if k := c.Kind(); s.kind != "" && k != s.kind {
		return fmt.Errorf("payload: cannot write a chunk of %s into a stream of %s; a stream has one kind", k, s.kind)
	}
	err := s.frame(FrameData, chunkSize(c), func(b []byte) ([]byte, error) {
		return encodeMap(chunkSchema, b, c)
	})
	if err == nil {
		s.kind = c.Kind()
	}
	return err
}

// End writes the end frame: the stream is complete.
func (s *StreamWriter) End() error {
	if err := s.ready(inData, "End"); err != nil {
		return err
	}
	err := s.frame(FrameEnd, 0, func(b []byte) ([]byte, error) { return b, nil })
	if err == nil {
		s.state = ended
	}
	return err
}

// Fail writes the error frame of e, which ends the stream: the stage
// failed after the header was written.
func (s *StreamWriter) Fail(e *StreamError) error {
	if err := s.ready(inData, "Fail"); err != nil {
		return err
	}
	if e == nil {
		return errors.New("payload: cannot write a nil stream error")
	}
	if p := e.problem(); p != "" {
		return fmt.Errorf("payload: cannot write a stream error with %s", p)
	}
	err := s.frame(FrameError, 64+len(e.Code)+len(e.Message), func(b []byte) ([]byte, error) {
		return encodeMap(errorSchema, b, e)
	})
	if err == nil {
		s.state = ended
	}
	return err
}

// ready checks that call may be made in the writer's state.
func (s *StreamWriter) ready(want streamState, call string) error {
	switch {
	case s.err != nil:
		return s.err
	case s.state == want:
		return nil
	case s.state == beforeHeader:
		return fmt.Errorf("payload: StreamWriter.%s before Header; a stream starts with its header", call)
	case s.state == inData:
		return fmt.Errorf("payload: StreamWriter.%s after Header; a stream has one header", call)
	}
	return fmt.Errorf("payload: StreamWriter.%s after the stream ended", call)
}

// frame writes one frame whose body body appends: the preamble first when
// the header has not been written, the frame's kind and length, the body,
// and the tag. hint is the body's expected size.
func (s *StreamWriter) frame(kind FrameKind, hint int, body func([]byte) ([]byte, error)) error {
	buf := getBuffer(preambleLen + frameHeadLen + hint + tagLen)
	defer putBuffer(buf)
	b := *buf
	if s.state == beforeHeader {
		b = append(b, s.preamble[:]...)
	}
	start := len(b)
	b = append(b, byte(kind), 0, 0, 0, 0)
	b, err := body(b)
	if err != nil {
		return fmt.Errorf("payload: encode a %s frame: %w", kind, err)
	}
	*buf = b[:0]
	n := len(b) - start - frameHeadLen
	if n > s.c.maxSize {
		return newError(CodeTooLarge, "a %s frame of %s is more than the payload size limit of %s; send shorter chunks or raise the limit", kind, size(n), size(s.c.maxSize))
	}
	binary.BigEndian.PutUint32(b[start+1:], uint32(n))
	if s.seal != nil {
		b = s.seal.seal(b, b[start:])
		*buf = b[:0]
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = fmt.Errorf("payload stream: writing frame %d: %w", s.frames, err)
		return s.err
	}
	s.frames++
	return nil
}
