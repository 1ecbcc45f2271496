package payload

// StreamReader: reading and checking a payload stream frame by frame, its
// big frames' memory taken from a budget.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/membudget"
)

// A StreamReader reads one payload stream: Header, then Next until it
// returns an error (io.EOF after the end frame). It checks every tag as
// the frame arrives when the codec has a key, and refuses a stream whose
// frames break the grammar (see docs/payload.md). Bad input is
// an *Error (CodeTruncated when the stream ends before its end frame);
// a failing reader gives an error that wraps the reader's error. Once
// Header or Next has returned an error, every later call returns it. A
// StreamReader is not safe for concurrent use.
type StreamReader struct {
	c       *Codec
	r       io.Reader
	signed  bool    // the preamble's signed flag
	issued  [8]byte // the preamble's issued-at time
	seal    *sealer // checks the tags: signed, and the codec has a key
	state   streamState
	hdrKind FrameKind
	hdr     Envelope // as read, for Check
	want    *Expect
	kind    engine.Kind // of the data frames: want.Input or the first chunk's
	frames  int         // frames read
	data    int         // data frames read
	buf     *[]byte     // the body of the current frame
	err     error

	budget  frameBudget // see SetBudget
	release func()      // gives back the current frame's part of the budget
}

// frameBudget is where a StreamReader takes the memory of its big frames.
type frameBudget struct {
	b    *membudget.Budget // nil: none
	ctx  context.Context   // ends the wait for memory
	what string            // the frames, as b's busy error names them
}

// ReserveMin is the longest frame body a StreamReader reads without taking
// its memory from its budget (SetBudget): a frame of audio is about 3 KB.
const ReserveMin = 1 << 20

// SetBudget makes s take the memory of each frame body longer than
// ReserveMin bytes from b before it reads the body, so that a server
// bounds the memory of the big frames all its streams read at once. what
// names the frames in b's busy error ("/v1/run frames"), and the wait for
// memory ends with ctx. A frame's part is given back when the next frame
// is read, or by Release. A refusal (a *membudget.BusyError, or ctx's
// error) ends the stream with that error.
func (s *StreamReader) SetBudget(ctx context.Context, b *membudget.Budget, what string) {
	s.budget = frameBudget{b: b, ctx: ctx, what: what}
}

// Release gives back the budget's part of the frame read last, if any.
// Call it once done with the reader; it must not run at the same time as
// Next.
func (s *StreamReader) Release() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// readBufSize is the read buffer of a StreamReader: frames are read from
// it, so that a frame costs one read of r or less, not two or more.
const readBufSize = 32 << 10

// NewStreamReader returns a reader of the stream in r. It reads nothing
// until Header; it may read r ahead of the frame it returns.
func (c *Codec) NewStreamReader(r io.Reader) *StreamReader {
	if _, ok := r.(*bufio.Reader); !ok {
		r = bufio.NewReaderSize(r, readBufSize)
	}
	return &StreamReader{c: c, r: r}
}

// Header reads the preamble and the header frame and returns the header's
// kind (FrameHandOff or FrameResult) and envelope, without data. With a
// nil want it makes only the checks that need no pipeline (a coordinator
// that does not know it): the header is well formed, required fields are
// set, a result header's To equals its From. Otherwise it also makes the
// checks of Decode against *want: pipeline and digest, stage ids, that the
// stream is for want.Stage (a hand-off header's To, a result header's
// From), the length of Params, and, in Next, that every chunk is of kind
// want.Input when it is set (Check makes the same checks later, for a
// reader that learns what to expect from the header). An error that is not
// an *Error and does not come from the reader means want is wrong (a bug).
func (s *StreamReader) Header(want *Expect) (FrameKind, *Envelope, error) {
	if s.err != nil {
		return 0, nil, s.err
	}
	if s.state != beforeHeader {
		return 0, nil, errors.New("payload: StreamReader.Header called twice")
	}
	if want != nil {
		if err := want.valid(); err != nil {
			return 0, nil, err
		}
		w := *want
		s.want = &w
		s.kind = w.Input
	}
	kind, e, err := s.header0()
	if err != nil {
		s.fail(err)
		return 0, nil, err
	}
	s.state = inData
	return kind, e, nil
}

func (s *StreamReader) header0() (FrameKind, *Envelope, error) {
	if err := s.readPreamble(); err != nil {
		return 0, nil, err
	}
	kind, body, err := s.readFrame()
	if err != nil {
		return 0, nil, err
	}
	// The header frame's tag, now checked, covers the preamble.
	if err := s.c.checkIssued("payload stream", s.issued[:]); err != nil {
		return 0, nil, err
	}
	if kind != FrameHandOff && kind != FrameResult {
		return 0, nil, newError(CodeBadFrame, "payload stream starts with a frame of kind %s; a stream starts with its header frame", kind)
	}
	e := new(Envelope)
	if err := decodeMap(envelopeSchema, body, e); err != nil {
		return 0, nil, undecodable("payload stream header", err)
	}
	if e.Version != FormatVersion {
		return 0, nil, newError(CodeUnsupportedVersion, "payload stream header has format version %d, this server reads version %d; run every stage server from the same omnistage release", e.Version, FormatVersion)
	}
	if err := headerProblem(kind, e); err != nil {
		return 0, nil, err
	}
	if s.want != nil {
		if err := checkHeader(kind, e, s.want); err != nil {
			return 0, nil, err
		}
	}
	s.hdrKind, s.hdr = kind, *e
	return kind, e, nil
}

// checkHeader makes the checks of Decode against want on e, the envelope
// of a header frame of kind.
func checkHeader(kind FrameKind, e *Envelope, want *Expect) *Error {
	return e.checkFor(want, func() *Error {
		if kind == FrameHandOff && e.To != want.Stage {
			return newError(CodeWrongStage, "payload stream is for stage %d, this server runs stage %d; send it to stage %d's server", e.To, want.Stage, e.To)
		}
		if kind == FrameResult && e.From != want.Stage {
			return newError(CodeWrongStage, "payload stream holds the result of stage %d, but the output of stage %d was expected", e.From, want.Stage)
		}
		return nil
	})
}

// Check makes on the header that Header read the checks that Header(&want)
// makes, for a reader that learns from the header what to expect (a server
// of several stages runs the stage the header names). It must be called
// after Header and before Next; when want.Input is set, every chunk that
// Next returns must be of that kind. Its errors are as Header's; an *Error
// ends the stream.
func (s *StreamReader) Check(want Expect) error {
	if s.err != nil {
		return s.err
	}
	if s.state != inData || s.frames != 1 {
		return errors.New("payload: StreamReader.Check must come after Header and before Next")
	}
	if err := want.valid(); err != nil {
		return err
	}
	if err := checkHeader(s.hdrKind, &s.hdr, &want); err != nil {
		s.fail(err)
		return err
	}
	s.want, s.kind = &want, want.Input
	return nil
}

func (s *StreamReader) readPreamble() error {
	var p [preambleLen]byte
	n, err := io.ReadFull(s.r, p[:])
	if m := min(n, len(streamMagic)); string(p[:m]) != streamMagic[:m] {
		return newError(CodeBadMagic, "the body is not an omnistage payload stream")
	}
	// The version first: a stream of another version may have a shorter
	// preamble.
	if v := p[len(streamMagic)]; n > len(streamMagic) && v != StreamVersion {
		return newError(CodeUnsupportedVersion, "payload stream has format version %d, this server reads version %d; run every stage server from the same omnistage release", v, StreamVersion)
	}
	if err != nil {
		return s.readError(err)
	}
	flags := p[len(streamMagic)+1]
	stamp := p[len(streamMagic)+2:]
	key, kerr := s.c.keyFor("payload stream", flags, stamp[:keyIDLen])
	if kerr != nil {
		return kerr
	}
	s.signed = flags&flagSigned != 0
	copy(s.issued[:], stamp[keyIDLen:stampLen])
	if key != nil {
		s.seal = key.sealer(streamKeyInfo, p[:])
	}
	return nil
}

// Next returns the chunk of the next data frame. After the end frame it
// returns io.EOF, after an error frame the *StreamError it holds; before
// returning either it reads on to make sure nothing follows the frame, so
// it returns only once the writer has closed its side (a read error there
// is ignored: the stream is complete). Every chunk is
// checked as Decode checks the chunks of an envelope, and all of them must
// be of one kind (want.Input, when Header was given one that sets it). The
// chunk is newly allocated and owned by the caller.
func (s *StreamReader) Next() (engine.Chunk, error) {
	if s.err != nil {
		return engine.Chunk{}, s.err
	}
	if s.state != inData {
		return engine.Chunk{}, errors.New("payload: StreamReader.Next before Header")
	}
	c, err := s.next()
	if err != nil {
		s.fail(err)
	}
	return c, err
}

func (s *StreamReader) next() (engine.Chunk, error) {
	kind, body, err := s.readFrame()
	if err != nil {
		return engine.Chunk{}, err
	}
	switch kind {
	case FrameData:
		return s.dataFrame(body)
	case FrameEnd:
		if len(body) != 0 {
			return engine.Chunk{}, newError(CodeBadFrame, "payload stream end frame has a body of %s; an end frame is empty", size(len(body)))
		}
		if err := s.atEnd(kind); err != nil {
			return engine.Chunk{}, err
		}
		return engine.Chunk{}, io.EOF
	case FrameError:
		return engine.Chunk{}, s.errorFrame(body)
	case FrameHandOff, FrameResult:
		return engine.Chunk{}, newError(CodeBadFrame, "payload stream has a second header frame (frame %d, a %s frame); a stream has one header", s.frames-1, kind)
	}
	return engine.Chunk{}, newError(CodeBadFrame, "payload stream frame %d has the unknown kind 0x%02x", s.frames-1, byte(kind))
}

// dataFrame decodes and checks the chunk of a data frame's body.
func (s *StreamReader) dataFrame(body []byte) (engine.Chunk, error) {
	i := s.data
	s.data++
	var c engine.Chunk
	if err := decodeMap(chunkSchema, body, &c); err != nil {
		return c, undecodable(fmt.Sprintf("payload stream data frame %d", i), err)
	}
	if p := chunkProblem(&c); p != "" {
		return c, newError(CodeBadChunk, "payload stream data frame %d: %s", i, p)
	}
	switch k := c.Kind(); {
	case s.kind == "":
		s.kind = k
	case k != s.kind && s.want != nil && s.want.Input != "":
		return c, newError(CodeBadChunk, "payload stream data frame %d is %s, but stage %d takes %s", i, k, s.want.Stage, s.want.Input)
	case k != s.kind:
		return c, newError(CodeBadChunk, "payload stream data frame %d is %s, but the stream is %s; a stream has one kind", i, k, s.kind)
	}
	return c, nil
}

// errorFrame decodes and checks an error frame's body, and returns the
// *StreamError it holds once nothing follows it, or why it is refused.
func (s *StreamReader) errorFrame(body []byte) error {
	var se StreamError
	if err := decodeMap(errorSchema, body, &se); err != nil {
		return undecodable("payload stream error frame", err)
	}
	if p := se.problem(); p != "" {
		return newError(CodeBadFrame, "payload stream error frame has %s", p)
	}
	if err := s.atEnd(FrameError); err != nil {
		return err
	}
	return &se
}

// fail ends the stream with err: every later call returns it.
func (s *StreamReader) fail(err error) {
	s.err, s.state = err, ended
	if s.buf != nil {
		putBuffer(s.buf)
		s.buf = nil
	}
}

// readFrame reads the next frame, checks its tag, and returns its kind and
// body; the body is valid until the next call.
func (s *StreamReader) readFrame() (FrameKind, []byte, error) {
	var head [frameHeadLen]byte
	if _, err := io.ReadFull(s.r, head[:]); err != nil {
		return 0, nil, s.readError(err)
	}
	kind := FrameKind(head[0])
	n := binary.BigEndian.Uint32(head[1:])
	if uint64(n) > uint64(s.c.maxSize) {
		return 0, nil, newError(CodeTooLarge, "payload stream frame %d (%s) has a body of %s, more than this server's limit of %s", s.frames, kind, size(int(n)), size(s.c.maxSize))
	}
	total := int(n)
	if s.signed {
		total += tagLen
	}
	s.Release()
	if s.budget.b != nil && total > ReserveMin {
		release, err := s.budget.b.Take(s.budget.ctx, int64(total), s.budget.what)
		if err != nil {
			return 0, nil, err
		}
		s.release = release
	}
	b, err := s.readBody(head[:], total)
	if err != nil {
		return 0, nil, s.readError(err)
	}
	frame := b[:frameHeadLen+n]
	if s.seal != nil && !s.seal.check(b[len(frame):], frame) {
		return 0, nil, newError(CodeSignatureInvalid, "payload stream frame %d does not match its signature: it was altered, reordered, dropped, repeated or taken from another stream, or signed with another key", s.frames)
	}
	s.frames++
	return kind, frame[frameHeadLen:], nil
}

// readBody returns head followed by n bytes read, in the reader's buffer,
// which grows by at most minGrow or what it already holds at a time, as
// the bytes arrive.
func (s *StreamReader) readBody(head []byte, n int) ([]byte, error) {
	if s.buf == nil {
		s.buf = getBuffer(0)
	}
	b := append((*s.buf)[:0], head...)
	n += len(head)
	defer func() { *s.buf = b[:0] }()
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(n-len(b), max(cap(b), minGrow)))
		}
		m, err := io.ReadFull(s.r, b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// atEnd checks that nothing follows the end or error frame. The stream is
// complete: a reader that fails instead of ending cleanly loses nothing, so
// its error is not one of the stream's.
func (s *StreamReader) atEnd(kind FrameKind) error {
	var one [1]byte
	if n, _ := io.ReadFull(s.r, one[:]); n > 0 {
		return newError(CodeBadFrame, "payload stream goes on after its %s frame; nothing follows it", kind)
	}
	return nil
}

// readError turns an error of the reader into the error of the stream: a
// stream that ends early is an *Error with CodeTruncated, any other error
// is wrapped.
func (s *StreamReader) readError(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return &Error{
			Code:    CodeTruncated,
			Message: fmt.Sprintf("payload stream ends early, after %d whole frames and before its end frame: the sender went away or the stream was cut", s.frames),
			Err:     err,
		}
	}
	return fmt.Errorf("payload stream: reading frame %d: %w", s.frames, err)
}
