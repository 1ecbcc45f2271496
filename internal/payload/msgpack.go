package payload

// The msgpack of this package is written and read by hand, on byte slices,
// rather than by the msgpack library's reflection over struct tags.
// Reflection preallocates whatever length a bin header claims (4 GiB from a
// ten-byte payload); it accepts nil for numbers, array-encoded structs and
// repeated keys; its DecodeString grows a pooled buffer by a megabyte for
// every string length beyond the input; and it encodes sample slices element
// by element: for 10 s of audio the body is 1.5 times larger and encoding
// and decoding are 15 to 40 times slower than with the little-endian bin
// used here (BenchmarkBody). Everything is decoded from memory, so a length
// is checked against the bytes that remain before anything is allocated for
// it. The writer uses the smallest encoding of each value, as the msgpack
// library does; the reader accepts any encoding of the right type.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// writer appends msgpack values to b, keeping the first error.
type writer struct {
	b   []byte
	err error
}

func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// head appends a type byte followed by n as a big-endian number of size
// bytes (0, 1, 2 or 4).
func (w *writer) head(code byte, n uint32, size int) {
	w.b = append(w.b, code)
	switch size {
	case 1:
		w.b = append(w.b, byte(n))
	case 2:
		w.b = binary.BigEndian.AppendUint16(w.b, uint16(n))
	case 4:
		w.b = binary.BigEndian.AppendUint32(w.b, n)
	}
}

// length appends the header of a map, array, str or bin of n elements or
// bytes: the fixed form when fix is not 0 and n is below fixMax, else the
// 8-bit (when c8 is not 0), 16-bit or 32-bit form.
func (w *writer) length(n int, fix byte, fixMax int, c8, c16, c32 byte) {
	switch {
	case fix != 0 && n < fixMax:
		w.b = append(w.b, fix|byte(n))
	case c8 != 0 && n <= math.MaxUint8:
		w.head(c8, uint32(n), 1)
	case n <= math.MaxUint16:
		w.head(c16, uint32(n), 2)
	case uint64(n) <= math.MaxUint32:
		w.head(c32, uint32(n), 4)
	default:
		w.fail(fmt.Errorf("a length of %d does not fit in msgpack", n))
	}
}

func (w *writer) mapLen(n int) {
	w.length(n, msgpcode.FixedMapLow, 16, 0, msgpcode.Map16, msgpcode.Map32)
}

func (w *writer) arrayLen(n int) {
	w.length(n, msgpcode.FixedArrayLow, 16, 0, msgpcode.Array16, msgpcode.Array32)
}

func (w *writer) binLen(n int) {
	w.length(n, 0, 0, msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32)
}

func (w *writer) str(s string) {
	w.length(len(s), msgpcode.FixedStrLow, 32, msgpcode.Str8, msgpcode.Str16, msgpcode.Str32)
	w.b = append(w.b, s...)
}

func (w *writer) bin(b []byte) {
	w.binLen(len(b))
	w.b = append(w.b, b...)
}

func (w *writer) nil() { w.b = append(w.b, msgpcode.Nil) }

func (w *writer) bool(b bool) {
	if b {
		w.b = append(w.b, msgpcode.True)
	} else {
		w.b = append(w.b, msgpcode.False)
	}
}

func (w *writer) float32(f float32) { w.head(msgpcode.Float, math.Float32bits(f), 4) }

// int appends n, which must fit in 32 bits like every integer of the format.
func (w *writer) int(n int) {
	switch {
	case n < math.MinInt32 || n > math.MaxInt32:
		w.fail(fmt.Errorf("integer %d does not fit in 32 bits", n))
	case n >= 0 && n <= math.MaxInt8:
		w.b = append(w.b, byte(n))
	case n >= 0 && n <= math.MaxUint8:
		w.head(msgpcode.Uint8, uint32(n), 1)
	case n >= 0 && n <= math.MaxUint16:
		w.head(msgpcode.Uint16, uint32(n), 2)
	case n >= 0:
		w.head(msgpcode.Uint32, uint32(n), 4)
	case n >= -32:
		w.b = append(w.b, byte(n))
	case n >= math.MinInt8:
		w.head(msgpcode.Int8, uint32(n), 1)
	case n >= math.MinInt16:
		w.head(msgpcode.Int16, uint32(n), 2)
	default:
		w.head(msgpcode.Int32, uint32(n), 4)
	}
}

// wireError is a problem found while decoding, located by a field path that
// grows as the error travels up.
type wireError struct {
	path    string
	missing bool // the field at path is absent
	msg     string
}

func (e *wireError) Error() string {
	if e.missing {
		return e.path + ": missing"
	}
	return e.path + ": " + e.msg
}

// undecodable turns an error of decodeMap into an *Error, CodeMissingField
// or CodeUndecodable; what names the bytes in the message ("payload").
func undecodable(what string, err error) *Error {
	var we *wireError
	if !errors.As(err, &we) {
		we = &wireError{msg: err.Error()}
	}
	switch {
	case we.missing:
		return newError(CodeMissingField, "%s has no %s field", what, we.path)
	case we.path == "":
		return newError(CodeUndecodable, "%s does not decode: %s", what, we.msg)
	}
	return newError(CodeUndecodable, "%s does not decode: %s: %s", what, we.path, we.msg)
}

// at prefixes the path of err with name (a field name or "[i]").
func at(name string, err error) error {
	var we *wireError
	if !errors.As(err, &we) {
		we = &wireError{msg: err.Error()}
	}
	switch {
	case we.path == "":
		we.path = name
	case strings.HasPrefix(we.path, "["):
		we.path = name + we.path
	default:
		we.path = name + "." + we.path
	}
	return we
}

func atIndex(i int, err error) error { return at(fmt.Sprintf("[%d]", i), err) }

func wireErrorf(format string, args ...any) error {
	return &wireError{msg: fmt.Sprintf(format, args...)}
}

// errTruncated is what every read past the end of the input becomes.
func errTruncated() error {
	return &wireError{msg: "the payload ends early (was it truncated?)"}
}

// reader reads msgpack values strictly from memory: each value must have
// exactly the msgpack type the format gives it, and no length is trusted
// beyond the bytes that remain. Values it returns as byte slices alias the
// input; everything a decoded envelope keeps is copied out of it, unless
// the reader owns its input (own).
type reader struct {
	b []byte // what remains to be read

	// owned says the input is the decoded value's to keep: the bins of
	// chunk data stay where they are (inPlace). floor is the address below
	// which the input may not be written: the end of the last bin kept.
	owned bool
	floor uintptr
}

// own makes r own its input, b: bins of chunk data are kept in it rather
// than copied. Nothing else may refer to b, and b may be written over.
func (r *reader) own(b []byte) {
	r.owned = true
	r.floor = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// inPlace returns the bytes of v, a bin just read, kept in r's input at an
// address that is a multiple of align, or nil when r does not own its
// input. v is returned as it is when it is aligned; otherwise its bytes
// are moved down to the aligned address below them, over bytes already
// read (its bin header, and what came before it), which nothing refers
// to; when a bin kept before reaches there, v is copied out instead.
func (r *reader) inPlace(v []byte, align uintptr) []byte {
	if !r.owned {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(v))
	addr := uintptr(p)
	off := addr % align
	if addr-off < r.floor {
		return bytes.Clone(v)
	}
	if off != 0 {
		dst := unsafe.Slice((*byte)(unsafe.Add(p, -int(off))), len(v))
		copy(dst, v)
		v = dst
	}
	r.floor = addr - off + uintptr(len(v))
	return v[:len(v):len(v)]
}

// peek returns the type byte of the next value.
func (r *reader) peek() (byte, error) {
	if len(r.b) == 0 {
		return 0, errTruncated()
	}
	return r.b[0], nil
}

// take consumes and returns the next n bytes.
func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b) {
		return nil, errTruncated()
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b, nil
}

// number consumes the type byte and the size-byte big-endian number after it.
func (r *reader) number(size int) (uint64, error) {
	b, err := r.take(1 + size)
	if err != nil {
		return 0, err
	}
	switch size {
	case 1:
		return uint64(b[1]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b[1:])), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b[1:])), nil
	case 8:
		return binary.BigEndian.Uint64(b[1:]), nil
	}
	return 0, nil
}

// length reads the header of a map, array, str or bin (what, for messages):
// fix is the fixed form's type byte and mask the bits of its length (0 when
// the type has none); c8, c16 and c32 the other forms (c8 0 when there is
// none). A length that cannot fit in what remains, when each unit takes at
// least unit bytes, is refused.
func (r *reader) length(what string, fix, mask, c8, c16, c32 byte, unit int) (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case mask != 0 && c&^mask == fix:
		r.b = r.b[1:]
		n = uint64(c & mask)
	case c8 != 0 && c == c8:
		n, err = r.number(1)
	case c == c16:
		n, err = r.number(2)
	case c == c32:
		n, err = r.number(4)
	default:
		return 0, wireErrorf("want %s, got %s", what, typeName(c))
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)/unit) {
		return 0, errTruncated()
	}
	return int(n), nil
}

func (r *reader) mapLen() (int, error) {
	return r.length("a map", msgpcode.FixedMapLow, 0x0f, 0, msgpcode.Map16, msgpcode.Map32, 2)
}

func (r *reader) arrayLen() (int, error) {
	return r.length("an array", msgpcode.FixedArrayLow, 0x0f, 0, msgpcode.Array16, msgpcode.Array32, 1)
}

func (r *reader) binLen() (int, error) {
	return r.length("binary data", 0, 0, msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32, 1)
}

func (r *reader) strLen() (int, error) {
	return r.length("a string", msgpcode.FixedStrLow, 0x1f, msgpcode.Str8, msgpcode.Str16, msgpcode.Str32, 1)
}

// binView reads a bin value and returns its bytes, aliasing the input.
func (r *reader) binView() ([]byte, error) {
	n, err := r.binLen()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// strView reads a str value and returns its bytes, aliasing the input.
func (r *reader) strView() ([]byte, error) {
	n, err := r.strLen()
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

func (r *reader) str() (string, error) {
	b, err := r.strView()
	return string(b), err
}

// isNil consumes a nil and reports whether the next value was one.
func (r *reader) isNil() (bool, error) {
	c, err := r.peek()
	if err != nil || c != msgpcode.Nil {
		return false, err
	}
	r.b = r.b[1:]
	return true, nil
}

// int reads an integer that fits in 32 bits.
func (r *reader) int() (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n int64
	switch {
	case msgpcode.IsFixedNum(c):
		r.b = r.b[1:]
		return int(int8(c)), nil
	case c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32 || c == msgpcode.Uint64:
		u, err := r.number(1 << (c - msgpcode.Uint8))
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt32 {
			return 0, wireErrorf("%d does not fit in 32 bits", u)
		}
		return int(u), nil
	case c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64:
		size := 1 << (c - msgpcode.Int8)
		u, err := r.number(size)
		if err != nil {
			return 0, err
		}
		n = int64(u<<(64-8*size)) >> (64 - 8*size) // sign-extend
	default:
		return 0, wireErrorf("want an integer, got %s", typeName(c))
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, wireErrorf("%d does not fit in 32 bits", n)
	}
	return int(n), nil
}

func (r *reader) bool() (bool, error) {
	c, err := r.peek()
	if err != nil {
		return false, err
	}
	if !isBool(c) {
		return false, wireErrorf("want a boolean, got %s", typeName(c))
	}
	r.b = r.b[1:]
	return c == msgpcode.True, nil
}

func (r *reader) float32() (float32, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Float {
		return 0, wireErrorf("want a float32, got %s", typeName(c))
	}
	u, err := r.number(4)
	return math.Float32frombits(uint32(u)), err
}

// maxKeyLen is the longest map key of the format.
const maxKeyLen = 16

// key reads a map key and returns its index in keys.
func (r *reader) key(keys []string) (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsString(c) {
		return 0, wireErrorf("want a string key, got %s", typeName(c))
	}
	n, err := r.strLen()
	if err != nil {
		return 0, err
	}
	if n > maxKeyLen {
		return 0, wireErrorf("unknown field of %d bytes", n)
	}
	k, err := r.take(n)
	if err != nil {
		return 0, err
	}
	for i, key := range keys {
		if key == string(k) {
			return i, nil
		}
	}
	return 0, wireErrorf("unknown field %q", k)
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isInt(c byte) bool {
	if msgpcode.IsFixedNum(c) {
		return true
	}
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return false
}

func isBool(c byte) bool { return c == msgpcode.True || c == msgpcode.False }

// typeName names the msgpack type that starts with c.
func typeName(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case isBool(c):
		return "a boolean"
	case isInt(c):
		return "an integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "a float"
	case msgpcode.IsString(c):
		return "a string"
	case msgpcode.IsBin(c):
		return "binary data"
	case isArray(c):
		return "an array"
	case isMap(c):
		return "a map"
	case msgpcode.IsExt(c):
		return "an extension"
	}
	return fmt.Sprintf("the unused type byte 0x%02x", c)
}
