package payload

// Codec: its options, its keys and clock, and the stamp that payload
// headers and stream preambles share (version, flags, key id, issued-at
// time) with its checks.

import (
	"encoding/binary"
	"sync/atomic"
	"time"
)

// DefaultMaxSize is the largest payload, in bytes before base64, and the
// largest stream frame body that a Codec writes or reads unless WithMaxSize
// says otherwise: about 17 minutes of 16 kHz audio.
const DefaultMaxSize = 32 << 20

// DefaultLifetime is the payload lifetime that omnistage serve gives its
// codec unless told otherwise (--payload-lifetime): a payload or stream
// issued longer ago is refused. A Codec's own default is no expiry.
const DefaultLifetime = 10 * time.Minute

// ClockSkew is how far in the future, by the reader's clock, a payload or
// stream may have been issued and still be accepted by a codec with a
// lifetime: the clocks of two servers differ a little.
const ClockSkew = 30 * time.Second

const (
	// stampLen is the length of the key id and issued-at time that a
	// payload's header and a stream's preamble hold.
	stampLen   = keyIDLen + 8
	flagSigned = 1 << 0 // a tag follows the body
)

// Codec turns envelopes into payloads, the opaque stage_input strings of
// /v1/run (Encode), and back (Decode); it also writes and reads payload
// streams (NewStreamWriter, NewStreamReader). It is safe for concurrent
// use, SetRing included.
type Codec struct {
	ring     atomic.Pointer[Ring] // nil without a key
	maxSize  int
	lifetime time.Duration // 0: no expiry
	now      func() time.Time
}

// Option configures a Codec.
type Option func(*Codec)

// WithMaxSize sets the largest payload, in bytes before base64, and the
// largest stream frame body the codec writes or reads; n <= 0 means
// DefaultMaxSize.
func WithMaxSize(n int) Option {
	return func(c *Codec) {
		if n > 0 {
			c.maxSize = n
		}
	}
}

// WithLifetime makes the codec refuse payloads and streams issued more
// than d ago, or more than ClockSkew in the future, by its clock; d <= 0
// means no expiry, the default.
func WithLifetime(d time.Duration) Option {
	return func(c *Codec) { c.lifetime = max(d, 0) }
}

// WithClock sets the clock that stamps payloads and streams with the time
// they were issued and that checks their lifetime; the default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Codec) {
		if now != nil {
			c.now = now
		}
	}
}

// NewCodec returns a codec that signs with key and refuses payloads and
// streams not signed with it (docs/payload.md describes the MAC):
// NewRingCodec with a ring of that one key. An empty key means no
// signing: payloads and streams are written unsigned and the tags of
// signed ones are ignored, since there is nothing to check them with. key
// is copied.
func NewCodec(key []byte, opts ...Option) *Codec {
	var r *Ring
	if len(key) > 0 {
		r = &Ring{keys: []*macer{newMacer(key)}}
	}
	return NewRingCodec(r, opts...)
}

// NewRingCodec returns a codec that signs with the newest key of r and
// refuses payloads and streams not signed with one of its keys; a nil r
// means no signing, as for NewCodec with an empty key.
func NewRingCodec(r *Ring, opts ...Option) *Codec {
	c := &Codec{maxSize: DefaultMaxSize, now: time.Now}
	c.ring.Store(r)
	for _, o := range opts {
		o(c)
	}
	return c
}

// SetRing replaces the codec's keys with r, at once for every payload and
// stream begun after it: a server reloading its key files calls it while
// the codec is in use. A nil r makes the codec unsigned.
func (c *Codec) SetRing(r *Ring) { c.ring.Store(r) }

// MaxSize returns the largest payload, in bytes before base64, and the
// largest stream frame body the codec accepts.
func (c *Codec) MaxSize() int { return c.maxSize }

// appendStamp appends to b the version byte, the flags, the key id and
// the issued-at time of a payload header or stream preamble signed by
// signer (nil: unsigned).
func (c *Codec) appendStamp(b []byte, version byte, signer *macer) []byte {
	if signer == nil {
		b = append(b, version, 0)
		b = append(b, noKey[:]...)
	} else {
		b = append(b, version, flagSigned)
		b = append(b, signer.id[:]...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(c.now().UnixMilli()))
}

// keyFor checks the flags and key id of a payload header or stream
// preamble (what) and returns the key that checks its tags: nil when it is
// unsigned or the codec has no key.
func (c *Codec) keyFor(what string, flags byte, id []byte) (*macer, *Error) {
	if flags&^flagSigned != 0 {
		return nil, newError(CodeUnsupportedVersion, "%s header has flags 0x%02x, which its format version does not define", what, flags)
	}
	r := c.ring.Load()
	if flags&flagSigned == 0 {
		if r != nil {
			return nil, newError(CodeSignatureMissing, "%s is not signed, but this server only accepts signed payloads and streams; give every stage server the same payload key", what)
		}
		if string(id) != string(noKey[:]) {
			return nil, newError(CodeUndecodable, "%s is not signed but names the payload key %x; an unsigned header names none", what, id)
		}
		return nil, nil
	}
	if r == nil {
		return nil, nil
	}
	key := r.key(id)
	if key == nil {
		return nil, r.unknownKey(what, id)
	}
	return key, nil
}

// noKey is the key id of an unsigned payload or stream.
var noKey KeyID

// checkIssued checks the issued-at time of a payload or stream (what), the
// 8 bytes b, against the codec's lifetime.
func (c *Codec) checkIssued(what string, b []byte) *Error {
	if c.lifetime <= 0 {
		return nil
	}
	issued := int64(binary.BigEndian.Uint64(b))
	now := c.now().UnixMilli()
	switch {
	case issued < now-c.lifetime.Milliseconds():
		return newError(CodeExpired, "%s was issued %s ago, longer than this server's payload lifetime of %s (--payload-lifetime): a payload must reach the next stage soon after the previous stage made it; start the request again from stage 0", what, ago(now, issued), c.lifetime)
	case issued > now+ClockSkew.Milliseconds():
		return newError(CodeFromFuture, "%s was issued %s in the future by this server's clock, more than the %s allowed for clock skew; synchronize the clocks of the stage servers (NTP)", what, ago(issued, now), ClockSkew)
	}
	return nil
}

// ago formats the time from the Unix time in milliseconds then to now,
// saturating for times that a real clock never shows.
func ago(now, then int64) time.Duration {
	return time.UnixMilli(now).Sub(time.UnixMilli(then)).Round(time.Millisecond)
}
