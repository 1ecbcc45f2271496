package payload

// Payloads: an envelope's binary form and the base64 stage_input string of
// a one-shot call, written and read back with their checks.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"unsafe"

	fastb64 "github.com/segmentio/asm/base64"

	"github.com/omnistage/omnistage/internal/engine"
)

const (
	magic     = "OSTG"
	headerLen = len(magic) + 2 + stampLen // magic, version, flags, key id, issued at
)

// b64 is the text encoding of payloads, with SIMD (AVX2 on amd64; on 10 s
// of audio here, 13 times the standard library's speed to encode and 6
// times to decode, see BenchmarkBase64): the standard library's took 0.9
// ms of a 3 ms hop. Strict makes the encoding of a given payload unique:
// every other string is refused. stdB64 is the same encoding from the
// standard library, the oracle of FuzzBase64, which names where a bad
// string goes wrong.
var (
	b64    = fastb64.RawURLEncoding.Strict()
	stdB64 = base64.RawURLEncoding.Strict()
)

// marshal returns e as a binary payload, with Encode's errors; the
// returned slice is the caller's.
func (c *Codec) marshal(e *Envelope) ([]byte, error) {
	if e == nil {
		return nil, errors.New("payload: cannot encode a nil envelope")
	}
	return c.appendPayload(make([]byte, 0, sizeHint(e)), e)
}

// appendPayload appends the binary payload of e to b.
func (c *Codec) appendPayload(b []byte, e *Envelope) ([]byte, error) {
	var signer *macer
	if r := c.ring.Load(); r != nil {
		signer = r.signer()
	}
	start := len(b)
	b, err := c.body(b, e, signer)
	if err != nil || signer == nil {
		return b, err
	}
	return signer.sealPayload(b, start), nil
}

// body appends the binary payload of e without its tag to b, after
// checking e and that the payload, tag included, fits in MaxSize; signer
// is the key that will sign it, nil for none.
func (c *Codec) body(b []byte, e *Envelope, signer *macer) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("payload: cannot encode an invalid envelope: %s", err.Message)
	}
	start := len(b)
	b = c.appendStamp(append(b, magic...), FormatVersion, signer)
	b, err := encodeMap(envelopeSchema, b, e)
	if err != nil {
		return nil, fmt.Errorf("payload: encode: %w", err)
	}
	n := len(b) - start
	if signer != nil {
		n += sealLen
	}
	if n > c.maxSize {
		return nil, newError(CodeTooLarge, "the output of stage %d makes a payload of %s, more than the limit of %s; send shorter input or raise the payload size limit", e.From, size(n), size(c.maxSize))
	}
	return b, nil
}

// Encode returns e as a stage_input string: the URL-safe base64 of its
// binary payload (header, msgpack body and, when the codec has a key,
// tag). It refuses an envelope that Decode would refuse whatever the
// server (a missing field, a bad chunk); that error is not an *Error,
// since the envelope was built by this server: it is a bug. A payload
// larger than MaxSize is an *Error with CodeTooLarge. e is not modified.
// The string is new; a caller that writes it and is done with it saves
// that by AppendEncode into a buffer it reuses.
func (c *Codec) Encode(e *Envelope) (string, error) {
	out, err := c.AppendEncode(nil, e)
	return unsafe.String(unsafe.SliceData(out), len(out)), err
}

// AppendEncode appends e's stage_input string to dst and returns the
// extended slice, with Encode's checks and errors (dst unchanged then).
// When dst has too little room it is grown to hold the string and, unless
// dst is nil, a few bytes more, for what the caller appends after it (the
// end of a JSON answer). The result is the caller's: nothing else refers
// to it, so a buffer may be reused for the next payload once the last one
// is written.
func (c *Codec) AppendEncode(dst []byte, e *Envelope) ([]byte, error) {
	if e == nil {
		return dst, errors.New("payload: cannot encode a nil envelope")
	}
	buf := getBuffer(sizeHint(e))
	defer putBuffer(buf)
	bin, err := c.appendPayload((*buf)[:0], e)
	if err != nil {
		return dst, err
	}
	*buf = bin[:0]
	n := b64.EncodedLen(len(bin))
	if cap(dst)-len(dst) < n {
		room := appendRoom
		if dst == nil {
			room = 0 // Encode's string
		}
		dst = append(make([]byte, 0, len(dst)+n+room), dst...)
	}
	b64.Encode(dst[len(dst):len(dst)+n], bin)
	return dst[:len(dst)+n], nil
}

// appendRoom is the room that AppendEncode leaves after the string when it
// grows dst.
const appendRoom = 64

// unmarshal returns the envelope in the binary payload b, with Decode's
// checks and errors; nothing of the envelope refers to b.
func (c *Codec) unmarshal(b []byte, want Expect) (*Envelope, error) {
	if err := want.valid(); err != nil {
		return nil, err
	}
	if len(b) > c.maxSize {
		return nil, newError(CodeTooLarge, "payload is %s, more than this server's limit of %s", size(len(b)), size(c.maxSize))
	}
	return c.decodePayload(b, &want, false)
}

// Decode returns the envelope in the stage_input string s, after checking
// its size (before decoding the base64), its base64, and that its payload
// is intact (and signed, when the codec has a key), well formed, and meant
// for the server described by want. Every problem with s is an *Error;
// any other error means want itself is wrong (a bug). The envelope is the
// caller's, as a Decoder's is (see Decoder.Decode): its chunks' data are
// the buffer s was decoded into, and nothing refers to s.
func (c *Codec) Decode(s string, want Expect) (*Envelope, error) {
	if err := want.valid(); err != nil {
		return nil, err
	}
	if n := b64.DecodedLen(len(s)); n > c.maxSize {
		return nil, newError(CodeTooLarge, "payload is %s, more than this server's limit of %s", size(n), size(c.maxSize))
	}
	d := c.NewDecoder(len(s))
	if _, err := d.Write(unsafe.Slice(unsafe.StringData(s), len(s))); err != nil {
		return nil, err
	}
	return d.Decode(want)
}

// decodePayload returns the envelope in the binary payload b, checked
// against want. With own, b is the envelope's to keep: its numeric chunk
// data are decoded in place (see reader.own).
func (c *Codec) decodePayload(b []byte, want *Expect, own bool) (*Envelope, error) {
	body, seal, key, err := c.open(b)
	if err != nil {
		return nil, err
	}
	if seal != nil && !key.checkPayload(b[:headerLen+len(body)], seal) {
		return nil, newError(CodeSignatureInvalid, "payload signature does not match: it was altered, or signed with another key; give every stage server the same payload key")
	}
	if err := c.checkIssued("payload", b[len(magic)+2+keyIDLen:headerLen]); err != nil {
		return nil, err
	}
	e, err := decodeEnvelope(body, own)
	if err != nil {
		return nil, err
	}
	if err := e.check(want); err != nil {
		return nil, err
	}
	return e, nil
}

// decodeEnvelope decodes the body of a payload of this version; own is as
// for decodePayload.
func decodeEnvelope(body []byte, own bool) (*Envelope, *Error) {
	e := new(Envelope)
	r := reader{b: body}
	if own {
		r.own(body)
	}
	if err := readMap(envelopeSchema, &r, e); err != nil {
		return nil, undecodable("payload", err)
	}
	if e.Version != FormatVersion {
		return nil, newError(CodeUndecodable, "payload does not decode: its header says format version %d but its body says %d", FormatVersion, e.Version)
	}
	return e, nil
}

// open checks the header of a binary payload and returns its msgpack body,
// its seal (nonce and tag) and the key to check the seal with: no seal and
// no key when the payload is unsigned or the codec has no key, since then
// there is nothing to check.
func (c *Codec) open(bin []byte) (body, seal []byte, key *macer, err *Error) {
	key, err = c.checkHeader(bin)
	if err != nil {
		return nil, nil, nil, err
	}
	body = bin[headerLen:]
	if bin[len(magic)+1]&flagSigned == 0 {
		return body, nil, nil, nil
	}
	if len(body) < sealLen {
		return nil, nil, nil, newError(CodeSignatureInvalid, "payload is too short to hold its signature (was it truncated?)")
	}
	body, seal = body[:len(body)-sealLen], body[len(body)-sealLen:]
	if key == nil {
		return body, nil, nil, nil
	}
	return body, seal, key, nil
}

// checkHeader checks the header at the start of bin, a binary payload or
// its first bytes: its magic, version, flags and key id, the checks that
// need nothing else of the payload. It returns the key that checks the
// payload's seal, nil when there is none to check (see open).
func (c *Codec) checkHeader(bin []byte) (*macer, *Error) {
	if len(bin) < len(magic)+2 || string(bin[:len(magic)]) != magic {
		return nil, newError(CodeBadMagic, "stage_input is not an omnistage payload; pass the stage_input of the previous /v1/run response unchanged")
	}
	if v := bin[len(magic)]; v != FormatVersion {
		return nil, newError(CodeUnsupportedVersion, "payload has format version %d, this server reads version %d; run every stage server from the same omnistage release", v, FormatVersion)
	}
	if len(bin) < headerLen {
		return nil, newError(CodeUndecodable, "payload is %d bytes, too short to hold its header", len(bin))
	}
	return c.keyFor("payload", bin[len(magic)+1], bin[len(magic)+2:len(magic)+2+keyIDLen])
}

// decodeBase64 decodes src into dst with b64, and returns the standard
// library's error when src is not a payload's base64: the fast decoder
// counts an error's offset from where its SIMD part stopped, and its URL
// alphabet also takes '+' and '/', which the standard one refuses (found
// by FuzzBase64).
func decodeBase64(dst, src []byte) (int, error) {
	n, err := b64.Decode(dst, src)
	if err == nil && bytes.IndexByte(src, '+') < 0 && bytes.IndexByte(src, '/') < 0 {
		return n, nil
	}
	if _, err := stdB64.Decode(dst, src); err != nil {
		return 0, err
	}
	return 0, errors.New("payload: the base64 decoders disagree") // FuzzBase64 says they do not
}

func notBase64(why string) *Error {
	return newError(CodeNotBase64, "stage_input is not URL-safe base64 without padding (%s); pass the stage_input of the previous /v1/run response unchanged", why)
}

// sizeHint estimates the size of e's binary payload, to allocate the
// buffer once.
func sizeHint(e *Envelope) int {
	n := 1024 + len(e.Prompt.Text) + len(e.Trace)
	for _, p := range e.Params {
		n += len(p) + 5
	}
	n += chunksSize(e.Data)
	for _, o := range e.Carried {
		n += 16 + chunksSize(o.Chunks)
	}
	return n
}

func chunksSize(cs []engine.Chunk) int {
	n := 0
	for i := range cs {
		n += chunkSize(&cs[i])
	}
	return n
}

// chunkSize estimates the encoded size of c.
func chunkSize(c *engine.Chunk) int {
	n := 64
	switch {
	case c.Text != nil:
		n += len(c.Text.Text)
	case c.Frames != nil:
		n += len(c.Frames.Voice) + 4*(len(c.Frames.Params)+len(c.Frames.Str))
	case c.Segments != nil:
		n += 16*len(c.Segments.Names) + 4*(len(c.Segments.Ends)+len(c.Segments.TargetPos)+len(c.Segments.TargetF0))
	case c.Audio != nil:
		n += 2 * len(c.Audio.Samples)
	case c.Words != nil:
		n += 48 * len(c.Words.Words)
	}
	return n
}
