package payload

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/omnistage/omnistage/internal/engine"
)

// The msgpack body is written and read by hand, with the library's low-level
// calls, rather than by reflection over struct tags. Reflection preallocates
// whatever length a bin header claims (4 GiB from a ten-byte payload); it
// accepts nil for numbers, array-encoded structs and repeated keys; and it
// encodes sample slices element by element: for 10 s of audio the body is
// 1.5 times larger and encoding and decoding are 15 to 40 times slower than
// with the little-endian bin used here (BenchmarkBody).

var (
	_ msgpack.CustomEncoder = (*Envelope)(nil)
	_ msgpack.CustomDecoder = (*Envelope)(nil)
)

// field is one key of a msgpack map: its wire key and the name used in
// messages.
type field struct{ key, name string }

// The keys of the envelope map, in the order they are written.
const (
	fVersion = iota
	fPipeline
	fDigest
	fTransferID
	fRequestID
	fFrom
	fTo
	fParams
	fPrompt
	fOutputs
	fFinal
	fCarried
	fData
)

var envelopeFields = []field{
	fVersion:    {"v", "version"},
	fPipeline:   {"p", "pipeline"},
	fDigest:     {"dg", "digest"},
	fTransferID: {"x", "transfer_id"},
	fRequestID:  {"r", "request_id"},
	fFrom:       {"f", "from"},
	fTo:         {"t", "to"},
	fParams:     {"sp", "sampling_params"},
	fPrompt:     {"in", "prompt"},
	fOutputs:    {"o", "output_modalities"},
	fFinal:      {"fs", "final_stage"},
	fCarried:    {"c", "carried"},
	fData:       {"d", "data"},
}

var promptFields = []field{{"text", "text"}}

var outputFields = []field{{"s", "stage"}, {"k", "kind"}, {"d", "chunks"}}

// The keys of a chunk map (engine.Chunk's msgpack tags); exactly one is
// present.
const (
	cText = iota
	cFrames
	cSegments
	cAudio
	cWords
)

var chunkFields = []field{
	cText:     {"t", "text"},
	cFrames:   {"f", "frames"},
	cSegments: {"s", "segments"},
	cAudio:    {"a", "audio"},
	cWords:    {"w", "words"},
}

var textFields = []field{{"text", "text"}}

var framesFields = []field{
	{"voice", "voice"}, {"channels", "channels"}, {"params", "params"},
	{"str_channels", "str_channels"}, {"str", "str"}, {"frame_shift", "frame_shift"},
}

var segmentsFields = []field{
	{"voice", "voice"}, {"names", "names"}, {"ends", "ends"}, {"cluster", "cluster"},
	{"target_pos", "target_pos"}, {"target_f0", "target_f0"},
}

var audioFields = []field{{"rate", "rate"}, {"samples", "samples"}}

var wordsFields = []field{{"words", "words"}}

var wordFields = []field{{"word", "word"}, {"start_ms", "start_ms"}, {"end_ms", "end_ms"}}

// all returns the mask of every field of fs: all of them are required.
func all(fs []field) uint32 { return 1<<len(fs) - 1 }

// EncodeMsgpack writes e as the msgpack body of a payload (without the
// header and tag that Codec adds). It implements msgpack.CustomEncoder.
// It writes FormatVersion as the version and does not validate e.
func (e *Envelope) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := &wireEncoder{e: enc}
	w.mapLen(len(envelopeFields))
	w.key(fVersion, envelopeFields)
	w.int(FormatVersion)
	w.key(fPipeline, envelopeFields)
	w.str(e.Pipeline)
	w.key(fDigest, envelopeFields)
	w.bin(e.Digest[:])
	w.key(fTransferID, envelopeFields)
	w.str(e.TransferID)
	w.key(fRequestID, envelopeFields)
	w.str(e.RequestID)
	w.key(fFrom, envelopeFields)
	w.int(e.From)
	w.key(fTo, envelopeFields)
	w.int(e.To)
	w.key(fParams, envelopeFields)
	w.arrayLen(len(e.Params))
	for _, p := range e.Params {
		if p == nil {
			w.nil()
		} else {
			w.bin(p)
		}
	}
	w.key(fPrompt, envelopeFields)
	w.mapLen(1)
	w.key(0, promptFields)
	w.str(e.Prompt.Text)
	w.key(fOutputs, envelopeFields)
	w.arrayLen(len(e.Outputs))
	for _, o := range e.Outputs {
		w.str(o)
	}
	w.key(fFinal, envelopeFields)
	w.int(e.Final)
	w.key(fCarried, envelopeFields)
	w.arrayLen(len(e.Carried))
	for i := range e.Carried {
		o := &e.Carried[i]
		w.mapLen(len(outputFields))
		w.key(0, outputFields)
		w.int(o.Stage)
		w.key(1, outputFields)
		w.str(string(o.Kind))
		w.key(2, outputFields)
		w.chunks(o.Chunks)
	}
	w.key(fData, envelopeFields)
	w.chunks(e.Data)
	return w.err
}

// DecodeMsgpack reads a msgpack body written by EncodeMsgpack into e. It
// implements msgpack.CustomDecoder. The decoder must read from an in-memory
// reader with a Len method (*bytes.Reader, as msgpack.Unmarshal uses), so
// that no length read from the input can make it allocate more than the
// input holds. Errors are *Error (CodeUndecodable or CodeMissingField); the
// envelope is not validated.
func (e *Envelope) DecodeMsgpack(dec *msgpack.Decoder) error {
	r, ok := dec.Buffered().(interface{ Len() int })
	if !ok {
		return errors.New("payload: an Envelope can only be decoded from an in-memory reader such as *bytes.Reader")
	}
	*e = Envelope{}
	w := &wireDecoder{d: dec, r: r}
	if err := w.envelope(e); err != nil {
		var we *wireError
		if !errors.As(err, &we) {
			we = &wireError{msg: err.Error()}
		}
		if we.missing {
			return newError(CodeMissingField, "payload has no %s field", we.path)
		}
		if we.path == "" {
			return newError(CodeUndecodable, "payload does not decode: %s", we.msg)
		}
		return newError(CodeUndecodable, "payload does not decode: %s: %s", we.path, we.msg)
	}
	return nil
}

// wireEncoder writes msgpack values, keeping the first error.
type wireEncoder struct {
	e   *msgpack.Encoder
	err error
}

func (w *wireEncoder) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *wireEncoder) key(i int, fs []field) { w.do(w.e.EncodeString(fs[i].key)) }
func (w *wireEncoder) mapLen(n int)          { w.do(w.e.EncodeMapLen(n)) }
func (w *wireEncoder) arrayLen(n int)        { w.do(w.e.EncodeArrayLen(n)) }
func (w *wireEncoder) str(s string)          { w.do(w.e.EncodeString(s)) }
func (w *wireEncoder) nil()                  { w.do(w.e.EncodeNil()) }
func (w *wireEncoder) bool(b bool)           { w.do(w.e.EncodeBool(b)) }
func (w *wireEncoder) float32(f float32)     { w.do(w.e.EncodeFloat32(f)) }

// int writes n, which must fit in 32 bits like every integer of the format.
func (w *wireEncoder) int(n int) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		w.do(fmt.Errorf("integer %d does not fit in 32 bits", n))
		return
	}
	w.do(w.e.EncodeInt(int64(n)))
}

func (w *wireEncoder) bin(b []byte) {
	w.do(w.e.EncodeBytesLen(len(b)))
	w.write(b)
}

func (w *wireEncoder) write(b []byte) {
	if w.err == nil {
		_, w.err = w.e.Writer().Write(b)
	}
}

// scratch returns an empty slice with capacity n to fill and pass to write;
// when the encoder writes to a bytes.Buffer it is the buffer's own free
// space, so the bytes are not copied twice.
func (w *wireEncoder) scratch(n int) []byte {
	if b, ok := w.e.Writer().(*bytes.Buffer); ok {
		b.Grow(n)
		return b.AvailableBuffer()
	}
	return make([]byte, 0, n)
}

// int16s writes samples as a bin of little-endian int16s.
func (w *wireEncoder) int16s(s []int16) {
	n := 2 * len(s)
	w.do(w.e.EncodeBytesLen(n))
	b := w.scratch(n)[:n]
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	w.write(b)
}

// float32s writes s as a bin of little-endian IEEE 754 float32s.
func (w *wireEncoder) float32s(s []float32) {
	n := 4 * len(s)
	w.do(w.e.EncodeBytesLen(n))
	b := w.scratch(n)[:n]
	for i, v := range s {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	w.write(b)
}

func (w *wireEncoder) chunks(cs []engine.Chunk) {
	w.arrayLen(len(cs))
	for i := range cs {
		w.chunk(&cs[i])
	}
}

// chunk writes a chunk as a map with one entry per field that is set
// (exactly one in a valid chunk).
func (w *wireEncoder) chunk(c *engine.Chunk) {
	n := 0
	for _, set := range [...]bool{c.Text != nil, c.Frames != nil, c.Segments != nil, c.Audio != nil, c.Words != nil} {
		if set {
			n++
		}
	}
	w.mapLen(n)
	if t := c.Text; t != nil {
		w.key(cText, chunkFields)
		w.mapLen(len(textFields))
		w.key(0, textFields)
		w.str(t.Text)
	}
	if f := c.Frames; f != nil {
		w.key(cFrames, chunkFields)
		w.mapLen(len(framesFields))
		w.key(0, framesFields)
		w.str(f.Voice)
		w.key(1, framesFields)
		w.int(f.Channels)
		w.key(2, framesFields)
		w.float32s(f.Params)
		w.key(3, framesFields)
		w.int(f.StrChannels)
		w.key(4, framesFields)
		w.float32s(f.Str)
		w.key(5, framesFields)
		w.float32(f.FrameShift)
	}
	if s := c.Segments; s != nil {
		w.key(cSegments, chunkFields)
		w.mapLen(len(segmentsFields))
		w.key(0, segmentsFields)
		w.str(s.Voice)
		w.key(1, segmentsFields)
		w.arrayLen(len(s.Names))
		for _, name := range s.Names {
			w.str(name)
		}
		w.key(2, segmentsFields)
		w.float32s(s.Ends)
		w.key(3, segmentsFields)
		w.arrayLen(len(s.Cluster))
		for _, b := range s.Cluster {
			w.bool(b)
		}
		w.key(4, segmentsFields)
		w.float32s(s.TargetPos)
		w.key(5, segmentsFields)
		w.float32s(s.TargetF0)
	}
	if a := c.Audio; a != nil {
		w.key(cAudio, chunkFields)
		w.mapLen(len(audioFields))
		w.key(0, audioFields)
		w.int(a.SampleRate)
		w.key(1, audioFields)
		w.int16s(a.Samples)
	}
	if ws := c.Words; ws != nil {
		w.key(cWords, chunkFields)
		w.mapLen(len(wordsFields))
		w.key(0, wordsFields)
		w.arrayLen(len(ws.Words))
		for _, word := range ws.Words {
			w.mapLen(len(wordFields))
			w.key(0, wordFields)
			w.str(word.Word)
			w.key(1, wordFields)
			w.int(word.StartMs)
			w.key(2, wordFields)
			w.int(word.EndMs)
		}
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

// truncated is what every read past the end of the body becomes.
func truncated() error {
	return &wireError{msg: "the payload ends early (was it truncated?)"}
}

// wireDecoder reads msgpack values strictly: each value must have exactly
// the msgpack type the format gives it, and no length is trusted beyond the
// bytes that remain.
type wireDecoder struct {
	d   *msgpack.Decoder
	r   interface{ Len() int }
	key [16]byte
	buf [4096]byte
}

func (w *wireDecoder) fail(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return truncated()
	}
	return err
}

// peek returns the type byte of the next value.
func (w *wireDecoder) peek() (byte, error) {
	c, err := w.d.PeekCode()
	if err != nil {
		return 0, w.fail(err)
	}
	return c, nil
}

// want checks that the next value's type byte satisfies ok.
func (w *wireDecoder) want(what string, ok func(byte) bool) error {
	c, err := w.peek()
	if err != nil {
		return err
	}
	if !ok(c) {
		return wireErrorf("want %s, got %s", what, typeName(c))
	}
	return nil
}

// checkLen refuses a length that cannot fit in what remains when each unit
// takes at least size bytes.
func (w *wireDecoder) checkLen(n, size int) error {
	if n < 0 || n > w.r.Len()/size {
		return truncated()
	}
	return nil
}

func (w *wireDecoder) mapLen() (int, error) {
	if err := w.want("a map", isMap); err != nil {
		return 0, err
	}
	n, err := w.d.DecodeMapLen()
	if err != nil {
		return 0, w.fail(err)
	}
	return n, w.checkLen(n, 2)
}

func (w *wireDecoder) arrayLen() (int, error) {
	if err := w.want("an array", isArray); err != nil {
		return 0, err
	}
	n, err := w.d.DecodeArrayLen()
	if err != nil {
		return 0, w.fail(err)
	}
	return n, w.checkLen(n, 1)
}

// binLen reads the header of a bin value and returns its length.
func (w *wireDecoder) binLen() (int, error) {
	if err := w.want("binary data", msgpcode.IsBin); err != nil {
		return 0, err
	}
	n, err := w.d.DecodeBytesLen()
	if err != nil {
		return 0, w.fail(err)
	}
	return n, w.checkLen(n, 1)
}

func (w *wireDecoder) bin() ([]byte, error) {
	n, err := w.binLen()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if err := w.d.ReadFull(b); err != nil {
		return nil, w.fail(err)
	}
	return b, nil
}

// optBin reads a bin or nil; nil gives a nil slice.
func (w *wireDecoder) optBin() ([]byte, error) {
	c, err := w.peek()
	if err != nil {
		return nil, err
	}
	if c == msgpcode.Nil {
		return nil, w.fail(w.d.DecodeNil())
	}
	return w.bin()
}

// str reads a string. It does not use Decoder.DecodeString: for a length
// beyond the input, that grows the (pooled) decoder's buffer by a megabyte
// on every call, a few bytes of input costing megabytes and quadratic time.
func (w *wireDecoder) str() (string, error) {
	if err := w.want("a string", msgpcode.IsString); err != nil {
		return "", err
	}
	n, err := w.d.DecodeBytesLen()
	if err != nil {
		return "", w.fail(err)
	}
	if err := w.checkLen(n, 1); err != nil {
		return "", err
	}
	var b []byte
	if n <= len(w.buf) {
		b = w.buf[:n]
	} else {
		b = make([]byte, n)
	}
	if err := w.d.ReadFull(b); err != nil {
		return "", w.fail(err)
	}
	return string(b), nil
}

// int reads an integer that fits in 32 bits.
func (w *wireDecoder) int() (int, error) {
	if err := w.want("an integer", isInt); err != nil {
		return 0, err
	}
	if c, _ := w.d.PeekCode(); c == msgpcode.Uint64 {
		// DecodeInt64 would wrap values above MaxInt64 to negative ones.
		n, err := w.d.DecodeUint64()
		if err != nil {
			return 0, w.fail(err)
		}
		if n > math.MaxInt32 {
			return 0, wireErrorf("%d does not fit in 32 bits", n)
		}
		return int(n), nil
	}
	n, err := w.d.DecodeInt64()
	if err != nil {
		return 0, w.fail(err)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, wireErrorf("%d does not fit in 32 bits", n)
	}
	return int(n), nil
}

func (w *wireDecoder) bool() (bool, error) {
	if err := w.want("a boolean", isBool); err != nil {
		return false, err
	}
	b, err := w.d.DecodeBool()
	return b, w.fail(err)
}

func (w *wireDecoder) float32() (float32, error) {
	if err := w.want("a float32", isFloat32); err != nil {
		return 0, err
	}
	f, err := w.d.DecodeFloat32()
	return f, w.fail(err)
}

// int16s reads a bin of little-endian int16s.
func (w *wireDecoder) int16s() ([]int16, error) {
	n, err := w.binLen()
	if err != nil || n == 0 {
		return nil, err
	}
	if n%2 != 0 {
		return nil, wireErrorf("%d bytes are not a whole number of int16 samples", n)
	}
	out := make([]int16, n/2)
	for o := out; len(o) > 0; {
		b := w.buf[:min(2*len(o), len(w.buf))]
		if err := w.d.ReadFull(b); err != nil {
			return nil, w.fail(err)
		}
		for i := range len(b) / 2 {
			o[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
		o = o[len(b)/2:]
	}
	return out, nil
}

// float32s reads a bin of little-endian float32s.
func (w *wireDecoder) float32s() ([]float32, error) {
	n, err := w.binLen()
	if err != nil || n == 0 {
		return nil, err
	}
	if n%4 != 0 {
		return nil, wireErrorf("%d bytes are not a whole number of float32s", n)
	}
	out := make([]float32, n/4)
	for o := out; len(o) > 0; {
		b := w.buf[:min(4*len(o), len(w.buf))]
		if err := w.d.ReadFull(b); err != nil {
			return nil, w.fail(err)
		}
		for i := range len(b) / 4 {
			o[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		o = o[len(b)/4:]
	}
	return out, nil
}

// fields reads a map whose keys are among fs (at most 32), each at most
// once, calling value with the index of each key to read its value. Every
// key in required must be present.
func (w *wireDecoder) fields(fs []field, required uint32, value func(i int) error) error {
	n, err := w.mapLen()
	if err != nil {
		return err
	}
	var seen uint32
	for range n {
		i, err := w.fieldKey(fs)
		if err != nil {
			return err
		}
		if seen&(1<<i) != 0 {
			return wireErrorf("field %q appears twice", fs[i].name)
		}
		seen |= 1 << i
		if err := value(i); err != nil {
			return at(fs[i].name, err)
		}
	}
	for i := range fs {
		if required&^seen&(1<<i) != 0 {
			return &wireError{path: fs[i].name, missing: true}
		}
	}
	return nil
}

// fieldKey reads a map key and returns its index in fs.
func (w *wireDecoder) fieldKey(fs []field) (int, error) {
	if err := w.want("a string key", msgpcode.IsString); err != nil {
		return 0, err
	}
	n, err := w.d.DecodeBytesLen()
	if err != nil {
		return 0, w.fail(err)
	}
	if n < 0 || n > len(w.key) {
		return 0, wireErrorf("unknown field of %d bytes", n)
	}
	k := w.key[:n]
	if err := w.d.ReadFull(k); err != nil {
		return 0, w.fail(err)
	}
	for i, f := range fs {
		if f.key == string(k) {
			return i, nil
		}
	}
	return 0, wireErrorf("unknown field %q", k)
}

func (w *wireDecoder) envelope(e *Envelope) error {
	return w.fields(envelopeFields, all(envelopeFields), func(i int) (err error) {
		switch i {
		case fVersion:
			e.Version, err = w.int()
		case fPipeline:
			e.Pipeline, err = w.str()
		case fDigest:
			var n int
			if n, err = w.binLen(); err != nil {
				return err
			}
			if n != len(e.Digest) {
				return wireErrorf("want %d bytes, got %d", len(e.Digest), n)
			}
			err = w.fail(w.d.ReadFull(e.Digest[:]))
		case fTransferID:
			e.TransferID, err = w.str()
		case fRequestID:
			e.RequestID, err = w.str()
		case fFrom:
			e.From, err = w.int()
		case fTo:
			e.To, err = w.int()
		case fParams:
			err = w.array(func(n int) { e.Params = make([]json.RawMessage, 0, n) }, func() error {
				p, err := w.optBin()
				e.Params = append(e.Params, p)
				return err
			})
		case fPrompt:
			err = w.fields(promptFields, all(promptFields), func(int) (err error) {
				e.Prompt.Text, err = w.str()
				return err
			})
		case fOutputs:
			err = w.array(func(n int) { e.Outputs = make([]string, 0, n) }, func() error {
				s, err := w.str()
				e.Outputs = append(e.Outputs, s)
				return err
			})
		case fFinal:
			e.Final, err = w.int()
		case fCarried:
			err = w.array(func(n int) { e.Carried = make([]Output, 0, n) }, func() error {
				var o Output
				if err := w.output(&o); err != nil {
					return err
				}
				e.Carried = append(e.Carried, o)
				return nil
			})
		case fData:
			e.Data, err = w.chunks()
		}
		return err
	})
}

// maxPrealloc bounds the capacity reserved for an array before its elements
// are read: a length is only an upper bound until they are.
const maxPrealloc = 1024

// array reads an array, calling start with a capacity to reserve (unless it
// is empty, which leaves the slice nil) and then elem once per element.
func (w *wireDecoder) array(start func(n int), elem func() error) error {
	n, err := w.arrayLen()
	if err != nil {
		return err
	}
	if n > 0 {
		start(min(n, maxPrealloc))
	}
	for i := range n {
		if err := elem(); err != nil {
			return atIndex(i, err)
		}
	}
	return nil
}

func (w *wireDecoder) output(o *Output) error {
	return w.fields(outputFields, all(outputFields), func(i int) (err error) {
		switch i {
		case 0:
			o.Stage, err = w.int()
		case 1:
			var k string
			k, err = w.str()
			o.Kind = engine.Kind(k)
		case 2:
			o.Chunks, err = w.chunks()
		}
		return err
	})
}

func (w *wireDecoder) chunks() ([]engine.Chunk, error) {
	var cs []engine.Chunk
	err := w.array(func(n int) { cs = make([]engine.Chunk, 0, n) }, func() error {
		var c engine.Chunk
		if err := w.chunk(&c); err != nil {
			return err
		}
		cs = append(cs, c)
		return nil
	})
	return cs, err
}

// chunk reads a chunk map. Any number of its fields may be present here;
// validation requires exactly one.
func (w *wireDecoder) chunk(c *engine.Chunk) error {
	return w.fields(chunkFields, 0, func(i int) error {
		switch i {
		case cText:
			c.Text = new(engine.Text)
			return w.fields(textFields, all(textFields), func(int) (err error) {
				c.Text.Text, err = w.str()
				return err
			})
		case cFrames:
			c.Frames = new(engine.Frames)
			return w.frames(c.Frames)
		case cSegments:
			c.Segments = new(engine.Segments)
			return w.segments(c.Segments)
		case cAudio:
			a := new(engine.Audio)
			c.Audio = a
			return w.fields(audioFields, all(audioFields), func(i int) (err error) {
				if i == 0 {
					a.SampleRate, err = w.int()
				} else {
					a.Samples, err = w.int16s()
				}
				return err
			})
		default:
			c.Words = new(engine.Words)
			return w.words(c.Words)
		}
	})
}

func (w *wireDecoder) frames(f *engine.Frames) error {
	return w.fields(framesFields, all(framesFields), func(i int) (err error) {
		switch i {
		case 0:
			f.Voice, err = w.str()
		case 1:
			f.Channels, err = w.int()
		case 2:
			f.Params, err = w.float32s()
		case 3:
			f.StrChannels, err = w.int()
		case 4:
			f.Str, err = w.float32s()
		case 5:
			f.FrameShift, err = w.float32()
		}
		return err
	})
}

func (w *wireDecoder) segments(s *engine.Segments) error {
	return w.fields(segmentsFields, all(segmentsFields), func(i int) (err error) {
		switch i {
		case 0:
			s.Voice, err = w.str()
		case 1:
			err = w.array(func(n int) { s.Names = make([]string, 0, n) }, func() error {
				name, err := w.str()
				s.Names = append(s.Names, name)
				return err
			})
		case 2:
			s.Ends, err = w.float32s()
		case 3:
			err = w.array(func(n int) { s.Cluster = make([]bool, 0, n) }, func() error {
				b, err := w.bool()
				s.Cluster = append(s.Cluster, b)
				return err
			})
		case 4:
			s.TargetPos, err = w.float32s()
		case 5:
			s.TargetF0, err = w.float32s()
		}
		return err
	})
}

func (w *wireDecoder) words(ws *engine.Words) error {
	return w.fields(wordsFields, all(wordsFields), func(int) error {
		return w.array(func(n int) { ws.Words = make([]engine.Word, 0, n) }, func() error {
			var word engine.Word
			err := w.fields(wordFields, all(wordFields), func(i int) (err error) {
				switch i {
				case 0:
					word.Word, err = w.str()
				case 1:
					word.StartMs, err = w.int()
				case 2:
					word.EndMs, err = w.int()
				}
				return err
			})
			ws.Words = append(ws.Words, word)
			return err
		})
	})
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

func isFloat32(c byte) bool { return c == msgpcode.Float }

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
