package payload

// Decoder: a stage_input string decoded as it arrives, part by part,
// straight into the buffer that the envelope decoded from it owns, its
// header checked as soon as its bytes are in.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
)

// headChars is how many characters of a stage_input string a Decoder
// holds before it decodes them into the header's bytes and checks them:
// the first whole quanta of base64 that hold the header.
const headChars = (headerLen + 2) / 3 * 4

// Decoder decodes one stage_input string that arrives in parts, such as
// the stage_input member of a JSON body read from the network, so that the
// string is never held whole: each part's base64 is decoded at once into
// one buffer, which the envelope that Decode returns owns (see Decode).
//
// The checks that need no more than the payload's header are made as soon
// as it is in, before the rest is decoded: the Write that completes the
// header refuses a string that is not a payload, one of another version,
// one unsigned where the codec has a key, and one signed with a key the
// codec lacks. The Write that takes the string past the codec's MaxSize
// refuses it too, and so does the Write of a part that is not base64. A
// Write that fails returns an *Error, as does every call after it.
//
// A Decoder is for one string and is not safe for concurrent use.
type Decoder struct {
	c    *Codec
	hint int // the string's expected length, or 0

	head  [headChars]byte // the first characters, until the header is checked
	nhead int
	bin   []byte  // the payload's bytes decoded so far; nil until the header is checked
	buf   *[]byte // bin's buffer when it came from the pool, for Release
	carry [4]byte
	nc    int // characters of an incomplete quantum, after the header
	pos   int // the characters decoded into bin
	chars int // the characters written
	err   error
}

// NewDecoder returns a Decoder of one stage_input string for c. hint, when
// positive, is the string's expected length (at most; a JSON body's
// declared length will do): the buffer for the payload is made for that
// many characters once the header is checked, rather than grown as the
// string arrives.
func (c *Codec) NewDecoder(hint int) *Decoder {
	return &Decoder{c: c, hint: max(hint, 0)}
}

// Write decodes p, the next characters of the string. It returns len(p)
// and nil, or 0 and an *Error when the string is refused (see Decoder).
func (d *Decoder) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if err := d.write(p); err != nil {
		d.err = err
		return 0, err
	}
	return len(p), nil
}

func (d *Decoder) write(p []byte) error {
	d.chars += len(p)
	total := b64.DecodedLen(d.chars)
	if total > d.c.maxSize {
		return newError(CodeTooLarge, "payload is more than this server's limit of %s", size(d.c.maxSize))
	}
	if d.bin == nil {
		k := copy(d.head[d.nhead:], p)
		d.nhead += k
		p = p[k:]
		if d.nhead < len(d.head) {
			return nil
		}
		if err := d.start(total); err != nil {
			return err
		}
	} else if c := d.capFor(total); c > cap(d.bin) {
		d.setBuffer(append(make([]byte, 0, c), d.bin...))
	}
	if d.nc > 0 {
		k := copy(d.carry[d.nc:], p)
		d.nc += k
		p = p[k:]
		if d.nc < len(d.carry) {
			return nil
		}
		d.nc = 0
		if err := d.decode(d.carry[:]); err != nil {
			return err
		}
	}
	whole := len(p) &^ 3
	if err := d.decode(p[:whole]); err != nil {
		return err
	}
	d.nc = copy(d.carry[:], p[whole:])
	return nil
}

// Need returns the capacity in bytes that the Decoder's buffer will have
// once it has taken n more characters: what it has (or, before the header,
// will make) when that will do, else what it grows to. A caller that
// bounds its memory takes the difference before it writes them.
func (d *Decoder) Need(n int) int {
	total := b64.DecodedLen(d.chars + n)
	if total > d.c.maxSize {
		return d.capFor(0) // the Write is refused before it grows
	}
	return d.capFor(total)
}

// capFor returns the capacity the buffer must have to hold n bytes: the
// capacity it has, or before the header the one it will be made with,
// when that will do; else twice that, or n when more, within MaxSize.
func (d *Decoder) capFor(n int) int {
	c := cap(d.bin)
	if d.bin == nil {
		c = headChars / 4 * 3
		if d.hint > 0 {
			c = max(c, b64.DecodedLen(min(d.hint, b64.EncodedLen(d.c.maxSize))))
		}
	}
	if n <= c {
		return c
	}
	return min(max(2*c, n), max(n, d.c.maxSize))
}

// start decodes the header's characters and checks the header; then it
// makes the buffer, with room for total bytes.
func (d *Decoder) start(total int) error {
	var hdr [headChars / 4 * 3]byte
	n, err := decodeBase64(hdr[:], d.head[:d.nhead])
	if err := d.base64Error(err, n, d.head[:d.nhead]); err != nil {
		return err
	}
	if _, err := d.c.checkHeader(hdr[:n]); err != nil {
		return err
	}
	buf := getBuffer(d.capFor(total))
	d.buf, d.bin = buf, append(*buf, hdr[:n]...)
	d.pos = d.nhead
	return nil
}

// decode decodes src, whole quanta or the string's last characters, at
// the end of bin, which has room for them.
func (d *Decoder) decode(src []byte) error {
	if len(src) == 0 {
		return nil
	}
	n, err := decodeBase64(d.bin[len(d.bin):len(d.bin)+b64.DecodedLen(len(src))], src)
	if err := d.base64Error(err, n, src); err != nil {
		return err
	}
	d.bin = d.bin[:len(d.bin)+n]
	d.pos += len(src)
	return nil
}

// base64Error turns the result of decoding src, the characters after
// pos, into n bytes into an *Error, or nil.
func (d *Decoder) base64Error(err error, n int, src []byte) *Error {
	if err == nil && b64.EncodedLen(n) == len(src) {
		return nil
	}
	// The decoder skips line breaks, and decodes what follows one out of
	// step: refuse them so that a payload has one spelling, unless bad
	// data comes first.
	lb := bytes.IndexAny(src, "\r\n")
	var ce base64.CorruptInputError
	switch {
	case errors.As(err, &ce) && (lb < 0 || int(ce) < lb):
		return notBase64(fmt.Sprintf("bad data at character %d", d.pos+int(ce)))
	case lb >= 0 || err == nil:
		return notBase64("it contains line breaks")
	}
	return notBase64(err.Error())
}

// Decode returns the envelope of the string written, with the checks of
// Codec.Decode. The envelope is the caller's, and owns the buffer the
// string was decoded into: the bytes of its numeric chunk data (audio
// samples, frame params and strengths, segment times, data chunks' bytes)
// are that buffer's, which nothing else refers to; nothing refers to what
// was written. It stays valid for as long as the caller keeps it, unless
// the caller gives its buffer back with Release. Call Decode once, after
// the last Write.
func (d *Decoder) Decode(want Expect) (*Envelope, error) {
	if err := want.valid(); err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.bin == nil { // a string shorter than the header's characters
		d.setBuffer(make([]byte, 0, b64.DecodedLen(d.nhead)))
		if err := d.decode(d.head[:d.nhead]); err != nil {
			return nil, err
		}
	} else if err := d.decode(d.carry[:d.nc]); err != nil {
		return nil, err
	}
	d.err = errors.New("payload: Decoder.Decode called twice")
	return d.c.decodePayload(d.bin, &want, true)
}

// setBuffer makes b the buffer of bin, giving a pooled one it replaces
// back to the pool.
func (d *Decoder) setBuffer(b []byte) {
	if d.buf != nil {
		putBuffer(d.buf)
		d.buf = nil
	}
	d.bin = b
}

// Release ends the caller's ownership of the envelope that Decode
// returned, for its buffer to serve another Decoder: nothing may use the
// envelope, its chunks or anything they hold after it. A caller calls it
// only when it knows that every reader of the envelope's data is done (a
// stage server, once the stage's job has ended and its answer is written;
// see package engine on who may hold chunks); one that cannot tell leaves
// the envelope to the garbage collector. Calling it more than once does
// nothing.
func (d *Decoder) Release() {
	if d.buf != nil {
		*d.buf = d.bin[:0]
		putBuffer(d.buf)
		d.buf, d.bin = nil, nil
	}
}
