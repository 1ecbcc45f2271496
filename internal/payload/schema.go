package payload

// This file is the msgpack schema of the format, stated once: each table
// below lists the keys of one msgpack map (key, name in messages, type,
// presence, meaning), and the same table drives the encoder, the strict
// decoder and the tables of docs/payload.md (TestDocSchema keeps the
// document equal to them). A map is written with its keys in table order.

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/bits"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/lebytes"
)

// presence says whether a field must be in its map.
type presence int

const (
	// required: always written; a map without it is refused.
	required presence = iota
	// nonEmpty: required, and an envelope whose value is empty (the zero
	// value or an empty list) is refused with CodeMissingField.
	nonEmpty
	// optional: written only when not empty; it may be absent.
	optional
	// oneOf: written only when set; a valid chunk sets exactly one of its
	// oneOf fields (checked by validation, not by the decoder).
	oneOf
)

func (p presence) String() string {
	return [...]string{"required", "non-empty", "optional", "one of"}[p]
}

// value is how a Go value of type V is written and read: typ names its
// msgpack type for the documentation, empty (nil when no value is empty)
// tells optional fields whether to write it. read fills *v with newly
// allocated values, aliasing the input only as reader.own allows.
type value[V any] struct {
	typ   string
	write func(w *writer, v *V)
	read  func(r *reader, v *V) error
	empty func(v *V) bool
}

// field is one row of a schema: a key of a msgpack map and the field of a
// T that it holds.
type field[T any] struct {
	key, name, typ, doc string
	presence            presence
	write               func(w *writer, t *T)
	read                func(r *reader, t *T) error
	empty               func(t *T) bool // nil: never empty
}

// fieldOf returns the row of key, whose value is the V that ref points to
// in a T.
func fieldOf[T, V any](key, name string, p presence, v value[V], ref func(*T) *V, doc string) field[T] {
	f := field[T]{
		key: key, name: name, typ: v.typ, doc: doc, presence: p,
		write: func(w *writer, t *T) { v.write(w, ref(t)) },
		read:  func(r *reader, t *T) error { return v.read(r, ref(t)) },
	}
	if v.empty != nil {
		f.empty = func(t *T) bool { return v.empty(ref(t)) }
	}
	return f
}

// schema is the table of one msgpack map that holds a T.
type schema[T any] struct {
	name, doc string
	fields    []field[T]
	keys      []string
	required  uint32 // bit i: fields[i] must be present
}

func newSchema[T any](name, doc string, fs ...field[T]) *schema[T] {
	if len(fs) > 32 {
		panic("payload: a schema has at most 32 fields")
	}
	s := &schema[T]{name: name, doc: doc, fields: fs}
	for i, f := range fs {
		s.keys = append(s.keys, f.key)
		if len(f.key) > maxKeyLen {
			panic("payload: key " + f.key + " is longer than maxKeyLen")
		}
		if (f.presence == optional || f.presence == oneOf) && f.empty == nil {
			panic("payload: optional field " + f.key + " has no empty test")
		}
		if f.presence == required || f.presence == nonEmpty {
			s.required |= 1 << i
		}
	}
	return s
}

// written reports whether f is written for t.
func (f *field[T]) written(t *T) bool {
	return f.empty == nil || (f.presence != optional && f.presence != oneOf) || !f.empty(t)
}

func (s *schema[T]) write(w *writer, t *T) {
	n := 0
	for i := range s.fields {
		if s.fields[i].written(t) {
			n++
		}
	}
	w.mapLen(n)
	for i := range s.fields {
		if f := &s.fields[i]; f.written(t) {
			w.str(f.key)
			f.write(w, t)
		}
	}
}

// read reads a map of s into t: every key must be one of the table's, at
// most once, and every required key must be present.
func (s *schema[T]) read(r *reader, t *T) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	var seen uint32
	for range n {
		i, err := r.key(s.keys)
		if err != nil {
			return err
		}
		f := &s.fields[i]
		if seen&(1<<i) != 0 {
			return wireErrorf("field %q appears twice", f.name)
		}
		seen |= 1 << i
		if err := f.read(r, t); err != nil {
			return at(f.name, err)
		}
	}
	if missing := s.required &^ seen; missing != 0 {
		return &wireError{path: s.fields[bits.TrailingZeros32(missing)].name, missing: true}
	}
	return nil
}

// mapOf is the value of a map of s.
func mapOf[T any](s *schema[T]) value[T] {
	return value[T]{typ: "map " + s.name, write: s.write, read: s.read}
}

// ptrTo is the value of a map of s held by pointer; nil is empty, and read
// allocates a new T.
func ptrTo[T any](s *schema[T]) value[*T] {
	return value[*T]{
		typ:   "map " + s.name,
		write: func(w *writer, v **T) { s.write(w, *v) },
		read: func(r *reader, v **T) error {
			*v = new(T)
			return s.read(r, *v)
		},
		empty: func(v **T) bool { return *v == nil },
	}
}

// maxPrealloc bounds the capacity reserved for an array before its elements
// are read: a length is only an upper bound until they are.
const maxPrealloc = 1024

// arrayOf is the value of an array of elem. An empty array reads as a nil
// slice.
// zeroInt is v, empty when zero: an optional int absent reads as 0.
func zeroInt(v value[int]) value[int] {
	v.empty = func(n *int) bool { return *n == 0 }
	return v
}

// falseEmpty is v, empty when false: an optional flag absent reads as
// false.
func falseEmpty(v value[bool]) value[bool] {
	v.empty = func(b *bool) bool { return !*b }
	return v
}

func arrayOf[V any](elem value[V]) value[[]V] {
	return value[[]V]{
		typ: "array of " + elem.typ,
		write: func(w *writer, s *[]V) {
			w.arrayLen(len(*s))
			for i := range *s {
				elem.write(w, &(*s)[i])
			}
		},
		read: func(r *reader, s *[]V) error {
			*s = nil
			n, err := r.arrayLen()
			if err != nil || n == 0 {
				return err
			}
			out := make([]V, 0, min(n, maxPrealloc))
			for i := range n {
				var zero V
				out = append(out, zero)
				if err := elem.read(r, &out[i]); err != nil {
					return atIndex(i, err)
				}
			}
			*s = out
			return nil
		},
		empty: func(s *[]V) bool { return len(*s) == 0 },
	}
}

// strOf is the value of a str.
func strOf[S ~string]() value[S] {
	return value[S]{
		typ:   "str",
		write: func(w *writer, s *S) { w.str(string(*s)) },
		read: func(r *reader, s *S) error {
			v, err := r.str()
			*s = S(v)
			return err
		},
		empty: func(s *S) bool { return *s == "" },
	}
}

var (
	strV = strOf[string]()

	intV = value[int]{
		typ:   "int",
		write: func(w *writer, n *int) { w.int(*n) },
		read: func(r *reader, n *int) (err error) {
			*n, err = r.int()
			return err
		},
	}

	// versionV writes FormatVersion whatever the value holds.
	versionV = value[int]{
		typ:   "int",
		write: func(w *writer, _ *int) { w.int(FormatVersion) },
		read:  intV.read,
	}

	boolV = value[bool]{
		typ:   "bool",
		write: func(w *writer, b *bool) { w.bool(*b) },
		read: func(r *reader, b *bool) (err error) {
			*b, err = r.bool()
			return err
		},
	}

	float32V = value[float32]{
		typ:   "float32",
		write: func(w *writer, f *float32) { w.float32(*f) },
		read: func(r *reader, f *float32) (err error) {
			*f, err = r.float32()
			return err
		},
	}

	digestV = value[[32]byte]{
		typ:   "bin, 32 bytes",
		write: func(w *writer, d *[32]byte) { w.bin(d[:]) },
		read: func(r *reader, d *[32]byte) error {
			b, err := r.binView()
			if err != nil {
				return err
			}
			if len(b) != len(d) {
				return wireErrorf("want %d bytes, got %d", len(d), len(b))
			}
			copy(d[:], b)
			return nil
		},
		empty: func(d *[32]byte) bool { return *d == [32]byte{} },
	}

	// nilOrBinV is a JSON text as a bin, or nil for a nil one.
	nilOrBinV = value[json.RawMessage]{
		typ: "nil or bin",
		write: func(w *writer, p *json.RawMessage) {
			if *p == nil {
				w.nil()
			} else {
				w.bin(*p)
			}
		},
		read: func(r *reader, p *json.RawMessage) error {
			if isNil, err := r.isNil(); isNil || err != nil {
				*p = nil
				return err
			}
			b, err := r.binView()
			*p = bytes.Clone(b)
			return err
		},
	}

	// bytesV is a bin, copied unless kept (reader.own); empty reads as nil.
	bytesV = value[[]byte]{
		typ:   "bin",
		write: func(w *writer, b *[]byte) { w.bin(*b) },
		read: func(r *reader, b *[]byte) error {
			v, err := r.binView()
			*b = nil
			if len(v) > 0 {
				*b = bytesKept(r, v)
			}
			return err
		},
	}

	// metaV is a map of str to str, written in key order.
	metaV = value[map[string]string]{
		typ: "map of str to str",
		write: func(w *writer, m *map[string]string) {
			w.mapLen(len(*m))
			for _, k := range slices.Sorted(maps.Keys(*m)) {
				w.str(k)
				w.str((*m)[k])
			}
		},
		read: func(r *reader, m *map[string]string) error {
			n, err := r.mapLen()
			if err != nil {
				return err
			}
			if n > engine.MaxMetaEntries {
				return wireErrorf("%d metadata entries; the limit is %d", n, engine.MaxMetaEntries)
			}
			*m = make(map[string]string, n)
			for range n {
				k, err := r.str()
				if err != nil {
					return err
				}
				v, err := r.str()
				if err != nil {
					return err
				}
				(*m)[k] = v
			}
			return nil
		},
		empty: func(m *map[string]string) bool { return len(*m) == 0 },
	}

	// int16sV is a bin of little-endian int16s; an empty one reads as nil.
	int16sV = value[[]int16]{
		typ: "bin of int16",
		write: func(w *writer, s *[]int16) {
			w.binLen(2 * len(*s))
			w.b = lebytes.AppendInt16s(w.b, *s)
		},
		read: func(r *reader, s *[]int16) error {
			*s = nil
			b, err := r.binView()
			if err != nil || len(b) == 0 {
				return err
			}
			if len(b)%2 != 0 {
				return wireErrorf("%d bytes are not a whole number of int16 samples", len(b))
			}
			*s = int16sOf(r, b)
			return nil
		},
	}

	// float32sV is a bin of little-endian float32s; an empty one reads as
	// nil.
	float32sV = value[[]float32]{
		typ: "bin of float32",
		write: func(w *writer, s *[]float32) {
			w.binLen(4 * len(*s))
			w.b = lebytes.AppendFloat32s(w.b, *s)
		},
		read: func(r *reader, s *[]float32) error {
			*s = nil
			b, err := r.binView()
			if err != nil || len(b) == 0 {
				return err
			}
			if len(b)%4 != 0 {
				return wireErrorf("%d bytes are not a whole number of float32s", len(b))
			}
			*s = float32sOf(r, b)
			return nil
		},
	}
)

// The schemas of the format.
var (
	envelopeSchema = newSchema("envelope", "the body of a payload, and of a stream's header frames",
		fieldOf("v", "version", required, versionV, func(e *Envelope) *int { return &e.Version }, "format version, equal to the header's"),
		fieldOf("p", "pipeline", nonEmpty, strV, func(e *Envelope) *string { return &e.Pipeline }, "pipeline name"),
		fieldOf("dg", "digest", nonEmpty, digestV, func(e *Envelope) *[32]byte { return &e.Digest }, "digest of the pipeline's stages and route"),
		fieldOf("x", "transfer_id", nonEmpty, strV, func(e *Envelope) *string { return &e.TransferID }, "transfer id, the same along the chain"),
		fieldOf("r", "request_id", nonEmpty, strV, func(e *Envelope) *string { return &e.RequestID }, "the caller's request id"),
		fieldOf("tp", "trace", optional, strV, func(e *Envelope) *string { return &e.Trace }, "W3C traceparent of the request"),
		fieldOf("f", "from", required, intV, func(e *Envelope) *int { return &e.From }, "the stage that produced the data"),
		fieldOf("t", "to", required, intV, func(e *Envelope) *int { return &e.To }, "the stage that must run next"),
		fieldOf("sp", "sampling_params", required, arrayOf(nilOrBinV), func(e *Envelope) *[]json.RawMessage { return &e.Params }, "by stage id: nil, or a JSON object or null"),
		fieldOf("in", "prompt", required, mapOf(promptSchema), func(e *Envelope) *engine.Prompt { return &e.Prompt }, "the request's original input"),
		fieldOf("o", "output_modalities", nonEmpty, arrayOf(strV), func(e *Envelope) *[]string { return &e.Outputs }, "selected output kinds"),
		fieldOf("fs", "final_stage", required, intV, func(e *Envelope) *int { return &e.Final }, "the request's final stage"),
		fieldOf("c", "carried", required, arrayOf(mapOf(outputSchema)), func(e *Envelope) *[]StageOutput { return &e.Carried }, "outputs of earlier stages for the answer"),
		fieldOf("d", "data", required, arrayOf(chunkV), func(e *Envelope) *[]engine.Chunk { return &e.Data }, "output of stage from, input of stage to"),
	)

	promptSchema = newSchema("prompt", "the request's input",
		fieldOf("text", "text", required, strV, func(p *engine.Prompt) *string { return &p.Text }, "input text"),
	)

	outputSchema = newSchema("output", "a carried output",
		fieldOf("s", "stage", required, intV, func(o *StageOutput) *int { return &o.Stage }, "the stage that produced it"),
		fieldOf("k", "kind", required, strOf[engine.Kind](), func(o *StageOutput) *engine.Kind { return &o.Kind }, "the kind of its chunks"),
		fieldOf("d", "chunks", required, arrayOf(chunkV), func(o *StageOutput) *[]engine.Chunk { return &o.Chunks }, "the stage's output, in order"),
	)

	chunkSchema = newSchema("chunk", "one chunk of a stream: exactly one of its one-of keys, and a span or none",
		fieldOf("t", "text", oneOf, ptrTo(textSchema), func(c *engine.Chunk) **engine.Text { return &c.Text }, "text"),
		fieldOf("f", "frames", oneOf, ptrTo(framesSchema), func(c *engine.Chunk) **engine.Frames { return &c.Frames }, "acoustic frames"),
		fieldOf("s", "segments", oneOf, ptrTo(segmentsSchema), func(c *engine.Chunk) **engine.Segments { return &c.Segments }, "diphone segments"),
		fieldOf("a", "audio", oneOf, ptrTo(audioSchema), func(c *engine.Chunk) **engine.Audio { return &c.Audio }, "audio"),
		fieldOf("w", "words", oneOf, ptrTo(wordsSchema), func(c *engine.Chunk) **engine.Words { return &c.Words }, "word timestamps"),
		fieldOf("tn", "tensors", oneOf, ptrTo(tensorsSchema), func(c *engine.Chunk) **engine.Tensors { return &c.Tensors }, "named tensors"),
		fieldOf("im", "image", oneOf, ptrTo(imageSchema), func(c *engine.Chunk) **engine.Image { return &c.Image }, "an encoded image"),
		fieldOf("rg", "regions", oneOf, ptrTo(regionsSchema), func(c *engine.Chunk) **engine.Regions { return &c.Regions }, "text regions of an image"),
		fieldOf("d", "data", oneOf, ptrTo(dataSchema), func(c *engine.Chunk) **engine.Data { return &c.Data }, "a chunk of a kind the pipeline declares"),
		fieldOf("sp", "span", optional, ptrTo(spanSchema), func(c *engine.Chunk) **engine.Span { return &c.Span }, "the sentence of the request's text the chunk begins to speak"),
	)
	chunkV = mapOf(chunkSchema)

	spanSchema = newSchema("span", "engine.Span",
		fieldOf("sentence", "sentence", required, intV, func(s *engine.Span) *int { return &s.Sentence }, "its index among the sentences spoken, from 0"),
		fieldOf("start", "start", required, intV, func(s *engine.Span) *int { return &s.Start }, "its start in the request's text, code points"),
		fieldOf("end", "end", required, intV, func(s *engine.Span) *int { return &s.End }, "its end in the request's text, code points, exclusive"),
		fieldOf("text", "text", required, strV, func(s *engine.Span) *string { return &s.Text }, "those code points of the text, or empty"),
	)

	textSchema = newSchema("text", "engine.Text",
		fieldOf("text", "text", required, strV, func(t *engine.Text) *string { return &t.Text }, "the text"),
		fieldOf("br", "break", optional, falseEmpty(boolV), func(t *engine.Text) *bool { return &t.Break }, "the text so far ends a sentence"),
	)

	framesSchema = newSchema("frames", "engine.Frames",
		fieldOf("voice", "voice", required, strV, func(f *engine.Frames) *string { return &f.Voice }, "voice"),
		fieldOf("channels", "channels", required, intV, func(f *engine.Frames) *int { return &f.Channels }, "params per frame"),
		fieldOf("params", "params", required, float32sV, func(f *engine.Frames) *[]float32 { return &f.Params }, "frame params, frame by frame"),
		fieldOf("str_channels", "str_channels", required, intV, func(f *engine.Frames) *int { return &f.StrChannels }, "strengths per frame"),
		fieldOf("str", "str", required, float32sV, func(f *engine.Frames) *[]float32 { return &f.Str }, "excitation strengths"),
		fieldOf("frame_shift", "frame_shift", required, float32V, func(f *engine.Frames) *float32 { return &f.FrameShift }, "seconds per frame"),
	)

	segmentsSchema = newSchema("segments", "engine.Segments",
		fieldOf("voice", "voice", required, strV, func(s *engine.Segments) *string { return &s.Voice }, "voice"),
		fieldOf("names", "names", required, arrayOf(strV), func(s *engine.Segments) *[]string { return &s.Names }, "segment names"),
		fieldOf("ends", "ends", required, float32sV, func(s *engine.Segments) *[]float32 { return &s.Ends }, "segment end times"),
		fieldOf("cluster", "cluster", required, arrayOf(boolV), func(s *engine.Segments) *[]bool { return &s.Cluster }, "cluster flags"),
		fieldOf("target_pos", "target_pos", required, float32sV, func(s *engine.Segments) *[]float32 { return &s.TargetPos }, "pitch target times"),
		fieldOf("target_f0", "target_f0", required, float32sV, func(s *engine.Segments) *[]float32 { return &s.TargetF0 }, "pitch target F0s"),
	)

	audioSchema = newSchema("audio", "engine.Audio",
		fieldOf("rate", "rate", required, intV, func(a *engine.Audio) *int { return &a.SampleRate }, "sample rate, Hz"),
		fieldOf("samples", "samples", required, int16sV, func(a *engine.Audio) *[]int16 { return &a.Samples }, "mono samples"),
		fieldOf("eos", "end_of_sentence", optional, falseEmpty(boolV), func(a *engine.Audio) *bool { return &a.EndOfSentence }, "marks the end of a sentence's audio"),
	)

	wordsSchema = newSchema("words", "engine.Words",
		fieldOf("words", "words", required, arrayOf(mapOf(wordSchema)), func(w *engine.Words) *[]engine.Word { return &w.Words }, "the words, in order"),
	)

	wordSchema = newSchema("word", "engine.Word",
		fieldOf("word", "word", required, strV, func(w *engine.Word) *string { return &w.Word }, "the word: the input's text of its span"),
		fieldOf("char_start", "char_start", optional, zeroInt(intV), func(w *engine.Word) *int { return &w.CharStart }, "span start in the input, code points"),
		fieldOf("char_end", "char_end", optional, zeroInt(intV), func(w *engine.Word) *int { return &w.CharEnd }, "span end in the input, code points, exclusive"),
		fieldOf("start_ms", "start_ms", required, intV, func(w *engine.Word) *int { return &w.StartMs }, "start, ms"),
		fieldOf("end_ms", "end_ms", required, intV, func(w *engine.Word) *int { return &w.EndMs }, "end, ms"),
		fieldOf("spoken", "spoken", optional, arrayOf(strV), func(w *engine.Word) *[]string { return &w.Spoken }, "the words spoken for the span"),
	)

	dataSchema = newSchema("data", "engine.Data",
		fieldOf("kind", "kind", nonEmpty, strOf[engine.Kind](), func(d *engine.Data) *engine.Kind { return &d.Kind }, "the kind, one the pipeline declares"),
		fieldOf("bytes", "bytes", required, bytesV, func(d *engine.Data) *[]byte { return &d.Bytes }, "the chunk's bytes, carried unchanged"),
		fieldOf("meta", "meta", optional, metaV, func(d *engine.Data) *map[string]string { return &d.Meta }, "string keys to string values"),
	)

	errorSchema = newSchema("error", "the body of a stream's error frame",
		fieldOf("status", "status", required, intV, func(e *StreamError) *int { return &e.Status }, "HTTP status, 400..599"),
		fieldOf("code", "code", required, strV, func(e *StreamError) *string { return &e.Code }, "error code, may be empty"),
		fieldOf("message", "message", nonEmpty, strV, func(e *StreamError) *string { return &e.Message }, "what went wrong"),
	)
)

// encodeMap appends the msgpack map of t to b.
func encodeMap[T any](s *schema[T], b []byte, t *T) ([]byte, error) {
	w := writer{b: b}
	s.write(&w, t)
	return w.b, w.err
}

// decodeMap reads t from b, which must hold exactly one map of s. Its
// errors are for undecodable.
func decodeMap[T any](s *schema[T], b []byte, t *T) error { return readMap(s, &reader{b: b}, t) }

// readMap reads t from r, which must hold exactly one map of s.
func readMap[T any](s *schema[T], r *reader, t *T) error {
	if err := s.read(r, t); err != nil {
		return err
	}
	if len(r.b) != 0 {
		return wireErrorf("extra data after the %s (%d bytes)", s.name, len(r.b))
	}
	return nil
}

// firstEmpty returns the name of the first field of s that must not be
// empty and is empty in t, or "".
func firstEmpty[T any](s *schema[T], t *T) string {
	for i := range s.fields {
		if f := &s.fields[i]; f.presence == nonEmpty && f.empty(t) {
			return f.name
		}
	}
	return ""
}
