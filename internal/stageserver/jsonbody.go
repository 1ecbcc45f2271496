package stageserver

// Reading a one-shot (JSON) /v1/run body: its stage_input string decoded
// as it arrives, straight into the payload's buffer; every byte that the
// reading holds taken from the server's budget before it is allocated; the
// read under a deadline; and a strict decode of the rest of the JSON.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/payload"
)

// inputKey starts a stage_input string member.
const inputKey = `"stage_input":"`

// inputStandIn replaces, for the JSON decoder, the stage_input string
// taken out of a body: a string that no client can send, since it holds
// 16 random bytes drawn when the process starts, so that a body cannot
// pass a string of its own for the one taken out. It is not base64url
// (the '~'), so if it ever reached the codec it would be refused.
var inputStandIn = func() string {
	var b [16]byte
	rand.Read(b[:]) // never fails: it crashes the program instead
	return `"~` + hex.EncodeToString(b[:]) + `~"`
}()

const (
	// headStart is the buffer a body's head is read into first: a
	// stage_input member comes within its first bytes in every answer
	// posted back.
	headStart = 512
	// bodyHead is how far into a body its first stage_input member may
	// begin for its string to be decoded as it arrives; a body whose
	// member begins later, or is not a string, is read whole first.
	bodyHead = 64 << 10
	// textCost is what a byte of a body's JSON text costs once decoded: the
	// text, the JSON decoder's copy of it (which grows up to twice its
	// length), and the copies decoding makes of values (stage_input as
	// raw JSON, a prompt's text).
	textCost = 5
	// chunkLen is the length of the buffers a stage_input string is read
	// into as it arrives.
	chunkLen = 64 << 10
)

// chunks holds the buffers (*[chunkLen]byte) stage_input strings are read
// into.
var chunks = sync.Pool{New: func() any { return new([chunkLen]byte) }}

// runBody is a one-shot body, read: its request, and, when its first
// stage_input member was a string taken out as it arrived, the payload
// decoder that took it (its place in the request held by inputStandIn).
type runBody struct {
	req   hop.RunRequest
	input *payload.Decoder
	inErr error // why input refused the string
}

// decode returns the envelope of in, the request's stage_input string,
// checked against want.
func (b *runBody) decode(c *payload.Codec, in []byte, want payload.Expect) (*payload.Envelope, error) {
	if b.input != nil && string(in) == inputStandIn {
		if b.inErr != nil {
			return nil, b.inErr
		}
		return b.input.Decode(want)
	}
	str, err := rawString(in)
	if err != nil {
		return nil, httperr.BadRequest("stage_input: %v", err)
	}
	return c.Decode(str, want)
}

// readRun reads a one-shot body under the body read deadline. The first
// stage_input string, when it begins within bodyHead bytes, is decoded as
// it arrives: only its payload's bytes are held, never its base64, and a
// payload whose header cannot be used is refused before the rest of it is
// decoded (the body is still read to its end, whose JSON decides). Every
// buffer the reading makes, the payload's included, is first taken from
// the server's budget (ServerOptions.MaxBodyMemory); a call that cannot
// take its part within the body read timeout is refused as overloaded
// (503, retryable) once it has read and dropped the rest of its body, so
// that its client, still sending, gets the answer. A body that declares
// more than MaxBody is refused at once, unread. release gives the part
// back, and the payload's buffer to the codec's pool: call it once nothing
// refers to the call's input (its stage's job has ended, which Serve waits
// for, and its answer is written).
func (s *Server) readRun(w http.ResponseWriter, r *http.Request) (b *runBody, release func(), err error) {
	hold := s.bodies.Hold("/v1/run bodies")
	if r.ContentLength > s.opts.MaxBody {
		return nil, hold.Release, &http.MaxBytesError{Limit: s.opts.MaxBody}
	}
	rd := &jsonReader{
		s: s, ctx: r.Context(), hold: hold, declared: r.ContentLength,
		body: http.MaxBytesReader(w, r.Body, s.opts.MaxBody), rc: http.NewResponseController(w),
	}
	rd.deadline()
	err = rd.read()
	if busy := (*membudget.BusyError)(nil); errors.As(err, &busy) {
		hold.Release()
		rd.drain()
	}
	_ = rd.rc.SetReadDeadline(time.Time{})
	if rd.chunk != nil {
		chunks.Put(rd.chunk)
	}
	release = func() {
		if rd.run.input != nil {
			rd.run.input.Release()
		}
		hold.Release()
	}
	if err != nil {
		return nil, release, err
	}
	return &rd.run, release, nil
}

// jsonReader reads one one-shot body.
type jsonReader struct {
	s        *Server
	ctx      context.Context
	hold     *membudget.Hold
	body     io.Reader
	rc       *http.ResponseController
	declared int64 // the body's declared length; -1 when it declares none
	got      int64 // the bytes of the body read
	run      runBody

	text    []byte // the body's text; with the string taken out, the text before it
	tail    []byte // the text after the string taken out
	textCap int64  // the bytes of text buffers made, outgrown ones too
	binCap  int64  // the bytes of payload buffers made, outgrown ones too
	payCap  int    // the capacity of the decoder's buffer
	chunk   *[chunkLen]byte
	str     stringScan
}

// deadline bounds the reading of what is left of the body.
func (rd *jsonReader) deadline() {
	_ = rd.rc.SetReadDeadline(time.Now().Add(rd.s.opts.BodyReadTimeout))
}

// reserve takes from the budget what the buffers made or about to be made
// cost, and extra bytes more for what is to come.
func (rd *jsonReader) reserve(extra int64) error {
	need := textCost*rd.textCap + rd.binCap + extra
	if rd.chunk != nil {
		need += chunkLen
	}
	if need <= rd.hold.Size() {
		return nil
	}
	start := time.Now()
	if err := rd.hold.Grow(rd.ctx, need-rd.hold.Size()); err != nil {
		return err
	}
	if time.Since(start) > time.Millisecond {
		rd.deadline() // waiting for memory is not reading
	}
	return nil
}

// room makes room in *buf for n more bytes, reserving it first.
func (rd *jsonReader) room(buf *[]byte, n int) error {
	if cap(*buf)-len(*buf) >= n {
		return nil
	}
	c := max(2*cap(*buf), len(*buf)+n)
	rd.textCap += int64(c)
	if err := rd.reserve(0); err != nil {
		return err
	}
	*buf = append(make([]byte, 0, c), *buf...)
	return nil
}

// left returns how many bytes of the body are still to come, at most: its
// declared length less what was read, or -1 when it declares none.
func (rd *jsonReader) left() int64 {
	if rd.declared < 0 {
		return -1
	}
	return max(rd.declared-rd.got, 0)
}

// drain reads what is left of a body refused for want of memory, without
// keeping it, so that its client, still sending, gets the answer rather
// than a reset connection.
func (rd *jsonReader) drain() {
	rd.deadline()
	if rd.chunk == nil {
		rd.chunk = chunks.Get().(*[chunkLen]byte)
	}
	for {
		if _, err := rd.readInto(rd.chunk[:]); err != nil {
			return
		}
	}
}

// readInto reads the next bytes of the body into p.
func (rd *jsonReader) readInto(p []byte) (int, error) {
	n, err := rd.body.Read(p)
	rd.got += int64(n)
	return n, err
}

// read reads the body's head, then either the rest of it whole or its
// stage_input string and what follows, and decodes the JSON.
func (rd *jsonReader) read() error {
	first := int64(headStart)
	if rd.declared >= 0 {
		first = min(first, rd.declared+1)
	}
	if err := rd.room(&rd.text, int(first)); err != nil {
		return err
	}
	start, err := rd.readHead()
	if err != nil {
		return err
	}
	if start < 0 {
		if err := rd.readAll(&rd.text); err != nil {
			return err
		}
		return httperr.UnmarshalJSON(rd.text, &rd.run.req)
	}
	if err := rd.takeInput(start); err != nil {
		return err
	}
	if err := rd.readAll(&rd.tail); err != nil {
		return err
	}
	cut := rd.text[:start-1]
	n := len(cut) + len(inputStandIn) + len(rd.tail)
	if err := rd.room(&cut, n-len(cut)); err != nil {
		return err
	}
	cut = append(append(cut, inputStandIn...), rd.tail...)
	return httperr.UnmarshalJSON(cut, &rd.run.req)
}

// readHead reads the body into text until its first stage_input member
// begins, bodyHead bytes were read, or the body ends. It returns where the
// member's string begins in text (after its opening quote), or -1 when
// the body is to be read whole: its first member does not begin in time,
// is not a string written without white space around its colon, or is
// not a member at all.
func (rd *jsonReader) readHead() (int, error) {
	for {
		from := max(len(rd.text)-len(inputKey)+1, 0)
		n, err := rd.readInto(rd.text[len(rd.text):cap(rd.text)])
		rd.text = rd.text[:len(rd.text)+n]
		if i := bytes.Index(rd.text[from:], []byte(inputKey)); i >= 0 {
			return stringStart(rd.text, from+i), nil
		}
		if errors.Is(err, io.EOF) || len(rd.text) >= bodyHead {
			return -1, nil
		}
		if err != nil {
			return 0, httperr.ReadError(err)
		}
		if len(rd.text) == cap(rd.text) {
			if err := rd.room(&rd.text, len(rd.text)); err != nil {
				return 0, err
			}
		}
	}
}

// stringStart returns where the string of the stage_input member whose key
// is at i in text begins, or -1 when what is at i is no member's key. A `"`
// that follows '{' or ',' (and white space) and is followed by
// `stage_input":` opens a key in any valid JSON text, since a string's own
// quotes are escaped and after a closing quote only punctuation may
// follow; in invalid text the strict decode of the rest fails.
func stringStart(text []byte, i int) int {
	j := i - 1
	for j >= 0 && isJSONSpace(text[j]) {
		j--
	}
	if j < 0 || text[j] != '{' && text[j] != ',' {
		return -1
	}
	return i + len(inputKey)
}

// tailRoom is how much text after a stage_input string, and how much
// text without it, the memory taken with the string's payload has room
// for.
const tailRoom = 512

// takeInput takes the stage_input string that begins at start in text
// out of the body, as it arrives, into a payload decoder, and keeps what
// follows it in tail. The memory of the payload's buffer is taken first,
// with room for the text that follows, at once: a call that has begun to
// read its string seldom waits for memory again.
func (rd *jsonReader) takeInput(start int) error {
	hint := rd.left() + int64(len(rd.text)-start)
	if rd.declared < 0 {
		hint = 0
	}
	rd.run.input = rd.s.codec.NewDecoder(int(hint))
	rd.payCap = rd.run.input.Need(0)
	rd.binCap += int64(rd.payCap)
	rd.chunk = chunks.Get().(*[chunkLen]byte)
	if err := rd.reserve(textCost * (2*tailRoom + int64(start+len(inputStandIn)))); err != nil {
		return err
	}
	p := rd.text[start:]
	for {
		n, err := rd.str.scan(p, rd.feed)
		if err != nil {
			return err
		}
		if rd.str.done {
			if err := rd.room(&rd.tail, len(p)-n); err != nil {
				return err
			}
			rd.tail = append(rd.tail, p[n:]...)
			return nil
		}
		k, rerr := rd.readInto(rd.chunk[:])
		p = rd.chunk[:k]
		if errors.Is(rerr, io.EOF) && k == 0 {
			return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body is truncated JSON: its stage_input string does not end")
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return httperr.ReadError(rerr)
		}
	}
}

// feed writes p, the next characters of the stage_input string, to its
// decoder, reserving the decoder's memory first; once the decoder has
// refused the string, the rest is dropped.
func (rd *jsonReader) feed(p []byte) error {
	if rd.run.inErr != nil || len(p) == 0 {
		return nil
	}
	if c := rd.run.input.Need(len(p)); c > rd.payCap {
		rd.binCap += int64(c)
		rd.payCap = c
		if err := rd.reserve(0); err != nil {
			return err
		}
	}
	_, rd.run.inErr = rd.run.input.Write(p)
	return nil
}

// readAll reads the rest of the body into *buf.
func (rd *jsonReader) readAll(buf *[]byte) error {
	for {
		want := 4 << 10
		if left := rd.left(); left >= 0 {
			want = int(left) + 1 // room for the end to show, once
		}
		if err := rd.room(buf, want); err != nil {
			return err
		}
		n, err := rd.readInto((*buf)[len(*buf):cap(*buf)])
		*buf = (*buf)[:len(*buf)+n]
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return httperr.ReadError(err)
		}
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
