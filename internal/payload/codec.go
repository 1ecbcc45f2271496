package payload

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/omnistage/omnistage/internal/engine"
)

// DefaultMaxSize is the largest payload, in bytes before base64, that a
// Codec encodes or decodes unless WithMaxSize says otherwise: about 17
// minutes of 16 kHz audio.
const DefaultMaxSize = 32 << 20

const (
	magic      = "OSTG"
	headerLen  = len(magic) + 2 // magic, version, flags
	flagSigned = 1 << 0         // a tag follows the body
	tagLen     = sha256.Size
)

// b64 is the text encoding of payloads. Strict makes the encoding of a
// given payload unique: every other string is refused.
var b64 = base64.RawURLEncoding.Strict()

// Codec turns envelopes into the opaque stage_input strings of /v1/run and
// back. It is safe for concurrent use.
type Codec struct {
	key     []byte
	maxSize int
	macs    sync.Pool // of hash.Hash keyed with key
}

// Option configures a Codec.
type Option func(*Codec)

// WithMaxSize sets the largest payload, in bytes before base64, the codec
// encodes or decodes; n <= 0 means DefaultMaxSize.
func WithMaxSize(n int) Option {
	return func(c *Codec) {
		if n > 0 {
			c.maxSize = n
		}
	}
}

// NewCodec returns a codec that signs with key, HMAC-SHA256, and refuses
// payloads not signed with it. An empty key means no signing: payloads are
// written unsigned and the tags of signed ones are ignored, since there is
// nothing to check them with. key is copied.
func NewCodec(key []byte, opts ...Option) *Codec {
	c := &Codec{maxSize: DefaultMaxSize}
	if len(key) > 0 {
		c.key = bytes.Clone(key)
		c.macs.New = func() any { return hmac.New(sha256.New, c.key) }
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Signed reports whether the codec has a key.
func (c *Codec) Signed() bool { return c.key != nil }

// MaxSize returns the largest payload, in bytes before base64, the codec
// accepts.
func (c *Codec) MaxSize() int { return c.maxSize }

// Encode returns e as a stage_input string. It refuses an envelope that
// Decode would refuse whatever the server (a missing field, a bad chunk);
// that error is not an *Error, since the envelope was built by this server:
// it is a bug. A payload larger than MaxSize is an *Error with
// CodeTooLarge. e is not modified.
func (c *Codec) Encode(e *Envelope) (string, error) {
	if e == nil {
		return "", errors.New("payload: cannot encode a nil envelope")
	}
	if err := e.validate(); err != nil {
		return "", fmt.Errorf("payload: cannot encode an invalid envelope: %s", err.Message)
	}
	buf := getBuffer(sizeHint(e))
	defer putBuffer(buf)
	buf.WriteString(magic)
	buf.WriteByte(FormatVersion)
	if c.key != nil {
		buf.WriteByte(flagSigned)
	} else {
		buf.WriteByte(0)
	}
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := e.EncodeMsgpack(enc)
	msgpack.PutEncoder(enc)
	if err != nil {
		return "", fmt.Errorf("payload: encode: %w", err)
	}
	if c.key != nil {
		mac := c.macs.Get().(hash.Hash)
		mac.Reset()
		mac.Write(buf.Bytes())
		buf.Grow(tagLen)
		buf.Write(mac.Sum(buf.AvailableBuffer()))
		c.macs.Put(mac)
	}
	if buf.Len() > c.maxSize {
		return "", newError(CodeTooLarge, "the output of stage %d makes a payload of %s, more than the limit of %s; send shorter input or raise the payload size limit", e.From, size(buf.Len()), size(c.maxSize))
	}
	var s strings.Builder
	s.Grow(b64.EncodedLen(buf.Len()))
	w := base64.NewEncoder(b64, &s)
	w.Write(buf.Bytes())
	w.Close()
	return s.String(), nil
}

// Decode returns the envelope in the stage_input string s, after checking
// that it is intact (and signed, when the codec has a key), well formed,
// and meant for the server described by want. Every problem with s is an
// *Error; any other error means want itself is wrong (a bug). The envelope
// and its chunks are newly allocated and owned by the caller.
func (c *Codec) Decode(s string, want Expect) (*Envelope, error) {
	if err := want.valid(); err != nil {
		return nil, err
	}
	if n := b64.DecodedLen(len(s)); n > c.maxSize {
		return nil, newError(CodeTooLarge, "payload is %s, more than this server's limit of %s", size(n), size(c.maxSize))
	}
	bin, err := b64.DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, notBase64(fmt.Sprintf("bad data at character %d", int64(ce)))
		}
		return nil, notBase64(err.Error())
	}
	if b64.EncodedLen(len(bin)) != len(s) {
		// The decoder skips line breaks; refuse them so that a payload has
		// one spelling.
		return nil, notBase64("it contains line breaks")
	}
	body, err := c.open(bin)
	if err != nil {
		return nil, err
	}
	dec := msgpack.GetDecoder()
	r := bytes.NewReader(body)
	dec.Reset(r)
	e := new(Envelope)
	err = e.DecodeMsgpack(dec)
	msgpack.PutDecoder(dec)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, newError(CodeUndecodable, "payload does not decode: extra data after the envelope (%d bytes)", r.Len())
	}
	if e.Version != FormatVersion {
		return nil, newError(CodeUndecodable, "payload does not decode: its header says format version %d but its body says %d", FormatVersion, e.Version)
	}
	if err := e.check(&want); err != nil {
		return nil, err
	}
	return e, nil
}

// open checks the header and the tag of a decoded payload and returns its
// msgpack body.
func (c *Codec) open(bin []byte) ([]byte, error) {
	if len(bin) < headerLen || string(bin[:len(magic)]) != magic {
		return nil, newError(CodeBadMagic, "stage_input is not an omnistage payload; pass the stage_input of the previous /v1/run response unchanged")
	}
	if v := bin[len(magic)]; v != FormatVersion {
		return nil, newError(CodeUnsupportedVersion, "payload has format version %d, this server reads version %d; run every stage server from the same omnistage release", v, FormatVersion)
	}
	flags := bin[len(magic)+1]
	if flags&^flagSigned != 0 {
		return nil, newError(CodeUnsupportedVersion, "payload header has flags 0x%02x, which format version %d does not define", flags, FormatVersion)
	}
	body := bin[headerLen:]
	if flags&flagSigned == 0 {
		if c.key != nil {
			return nil, newError(CodeSignatureMissing, "payload is not signed, but this server only accepts signed payloads; give every stage server the same payload key")
		}
		return body, nil
	}
	if len(body) < tagLen {
		return nil, newError(CodeSignatureInvalid, "payload is too short to hold its signature (was it truncated?)")
	}
	body, tag := body[:len(body)-tagLen], body[len(body)-tagLen:]
	if c.key == nil {
		return body, nil
	}
	mac := c.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(bin[:len(bin)-tagLen])
	var sum [tagLen]byte
	ok := hmac.Equal(mac.Sum(sum[:0]), tag)
	c.macs.Put(mac)
	if !ok {
		return nil, newError(CodeSignatureInvalid, "payload signature does not match: it was altered, or signed with another key; give every stage server the same payload key")
	}
	return body, nil
}

func notBase64(why string) *Error {
	return newError(CodeNotBase64, "stage_input is not URL-safe base64 without padding (%s); pass the stage_input of the previous /v1/run response unchanged", why)
}

// sizeHint estimates the encoded size of e, to allocate the buffer once.
func sizeHint(e *Envelope) int {
	n := 1024 + len(e.Prompt.Text)
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
	for _, c := range cs {
		n += 64
		switch {
		case c.Text != nil:
			n += len(c.Text.Text)
		case c.Frames != nil:
			n += 4 * (len(c.Frames.Params) + len(c.Frames.Str))
		case c.Segments != nil:
			n += 16*len(c.Segments.Names) + 4*(len(c.Segments.Ends)+len(c.Segments.TargetPos)+len(c.Segments.TargetF0))
		case c.Audio != nil:
			n += 2 * len(c.Audio.Samples)
		case c.Words != nil:
			n += 48 * len(c.Words.Words)
		}
	}
	return n
}

// bufs holds encode buffers; bigger ones are dropped so that a burst of
// long payloads does not pin memory.
var bufs sync.Pool

const maxPooled = 4 << 20

func getBuffer(n int) *bytes.Buffer {
	b, _ := bufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	b.Grow(n)
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooled {
		return
	}
	b.Reset()
	bufs.Put(b)
}

// size formats a byte count for a person.
func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
