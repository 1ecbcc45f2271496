package payload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// streamFrame is one frame of a stream, as the tests take streams apart and
// build them.
type streamFrame struct {
	kind FrameKind
	body []byte
	tag  []byte // nil in an unsigned stream
}

// streamHeader returns the envelope of a header frame of kind: from stage
// 0 to stage 1, or the result of stage 1.
func streamHeader(kind FrameKind) *Envelope {
	e := base()
	e.Trace = testTrace
	if kind == FrameResult {
		e.From, e.To = 1, 1
	}
	return e
}

// countingWriter counts the Write calls made to it.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(b)
}

// writeStream writes a stream of a header of kind, data, then an end frame
// or, when fail is not nil, an error frame. It checks that each frame took
// one Write.
func writeStream(t testing.TB, c *Codec, kind FrameKind, hdr *Envelope, data []engine.Chunk, fail *StreamError) []byte {
	t.Helper()
	var w countingWriter
	s := c.NewStreamWriter(&w)
	if err := s.Header(kind, hdr); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if err := s.Data(&data[i]); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if fail != nil {
		err = s.Fail(fail)
	} else {
		err = s.End()
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := len(data) + 2; w.writes != want {
		t.Fatalf("%d frames took %d writes", want, w.writes)
	}
	return w.Bytes()
}

// readStream reads a whole stream: its header, its chunks, and the error
// that ended it (io.EOF after an end frame).
func readStream(c *Codec, b []byte, want *Expect) (FrameKind, *Envelope, []engine.Chunk, error) {
	r := c.NewStreamReader(bytes.NewReader(b))
	kind, e, err := r.Header(want)
	if err != nil {
		return 0, nil, nil, err
	}
	var cs []engine.Chunk
	for {
		c, err := r.Next()
		if err != nil {
			return kind, e, cs, err
		}
		cs = append(cs, c)
	}
}

// parseStream takes a stream apart into its preamble and frames.
func parseStream(t testing.TB, b []byte) ([]byte, []streamFrame) {
	t.Helper()
	pre, b := b[:preambleLen], b[preambleLen:]
	signed := pre[5]&flagSigned != 0
	var frames []streamFrame
	for len(b) > 0 {
		n := int(binary.BigEndian.Uint32(b[1:]))
		f := streamFrame{kind: FrameKind(b[0]), body: b[frameHeadLen : frameHeadLen+n]}
		b = b[frameHeadLen+n:]
		if signed {
			f.tag, b = b[:tagLen], b[tagLen:]
		}
		frames = append(frames, f)
	}
	return pre, frames
}

// joinStream assembles pre and frames as they are, tags included.
func joinStream(pre []byte, frames ...streamFrame) []byte {
	b := bytes.Clone(pre)
	for _, f := range frames {
		b = append(b, byte(f.kind))
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.body)))
		b = append(b, f.body...)
		b = append(b, f.tag...)
	}
	return b
}

// buildStream assembles a stream with a preamble of flags, the id of key,
// testIssued and nonce, and the kinds and bodies of frames, tagged with key
// when it is not nil: the tags of the package documentation, written out
// independently of stream.go.
func buildStream(key, nonce []byte, frames ...streamFrame) []byte {
	pre := append([]byte(streamMagic), StreamVersion, 0)
	if key != nil {
		pre[5] = flagSigned
	}
	pre = append(pre, stamp(key, testIssued)...)
	pre = append(pre, nonce...)
	b := bytes.Clone(pre)
	var sealKey []byte
	if key != nil {
		sealKey = referenceKey(key, "omnistage stream GMAC key\x00", pre)
	}
	for i, f := range frames {
		head := append([]byte{byte(f.kind)}, binary.BigEndian.AppendUint32(nil, uint32(len(f.body)))...)
		b = append(b, head...)
		b = append(b, f.body...)
		if key != nil {
			b = append(b, referenceTag(sealKey, uint64(i), append(head, f.body...))...)
		}
	}
	return b
}

func headerBody(t testing.TB, e *Envelope) []byte {
	t.Helper()
	return body(t, e)
}

func chunkBody(t testing.TB, c engine.Chunk) []byte {
	t.Helper()
	b, err := encodeMap(chunkSchema, nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func errorBody(t testing.TB, e StreamError) []byte {
	t.Helper()
	b, err := encodeMap(errorSchema, nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func codeOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestStreamRoundTrip(t *testing.T) {
	chunks := map[string][]engine.Chunk{
		"text":     {textChunk("Hello"), textChunk(" world")},
		"frames":   {framesChunk(20, 26, 5), framesChunk(1, 26, 5)},
		"segments": {segmentsChunk()},
		"audio":    {audioChunk(1600), audioChunk(1), audioChunk(70000)},
		"spans":    {spanned(framesChunk(20, 26, 5), 0, 0, "Hello."), framesChunk(1, 26, 5), spanned(framesChunk(3, 26, 5), 1, 7, "Wörld?")},
		"words":    {wordsChunk(), wordsChunk()},
		"data":     {dataChunk("phonemes", "h@l'oU", map[string]string{"voice": "en-us"}), dataChunk("phonemes", "", nil)},
		"none":     nil,
	}
	failure := &StreamError{Status: 503, Code: "stage_lost", Message: "stage 1 lost its replica"}
	for name, data := range chunks {
		for _, kind := range []FrameKind{FrameHandOff, FrameResult} {
			for _, key := range [][]byte{nil, testKey} {
				for _, fail := range []*StreamError{nil, failure} {
					tname := fmt.Sprintf("%s/%c/signed=%t/fail=%t", name, kind, key != nil, fail != nil)
					t.Run(tname, func(t *testing.T) {
						c := NewCodec(key, WithClock(testClock))
						hdr := streamHeader(kind)
						b := writeStream(t, c, kind, hdr, data, fail)
						if !bytes.HasPrefix(b, []byte("OSTS\x02")) || (b[5] == 1) != (key != nil) {
							t.Fatalf("stream starts %q", b[:6])
						}
						want := expect(1)
						if len(data) > 0 {
							want.Input = data[0].Kind()
						}
						for _, w := range []*Expect{nil, &want} {
							gotKind, gotHdr, got, err := readStream(c, b, w)
							if fail == nil && err != io.EOF || fail != nil && !reflect.DeepEqual(err, fail) {
								t.Fatalf("stream ends with %v", err)
							}
							if gotKind != kind || !reflect.DeepEqual(gotHdr, hdr) || !reflect.DeepEqual(got, data) {
								t.Fatalf("round trip changed the stream:\n got %c %+v %+v\nwant %c %+v %+v", gotKind, gotHdr, got, kind, hdr, data)
							}
						}
						// The writer follows the documented construction.
						pre, frames := parseStream(t, b)
						if again := buildStream(key, pre[len(pre)-nonceLen:], frames...); !bytes.Equal(again, b) {
							t.Fatal("the stream differs from the one the package documentation describes")
						}
					})
				}
			}
		}
	}
}

// TestStreamReaderIsSticky checks that a reader keeps returning the error
// that ended its stream.
func TestStreamReaderIsSticky(t *testing.T) {
	c := NewCodec(testKey)
	b := writeStream(t, c, FrameHandOff, streamHeader(FrameHandOff), []engine.Chunk{textChunk("a")}, nil)
	r := c.NewStreamReader(bytes.NewReader(b))
	if _, err := r.Next(); err == nil || codeOf(err) != "" {
		t.Fatalf("Next before Header = %v; want a plain error", err)
	}
	if _, _, err := r.Header(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Header(nil); err == nil {
		t.Fatal("a second Header succeeded")
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("Next after the end = %v", err)
		}
	}
	bad := bytes.Clone(b)
	bad[len(bad)-1] ^= 1
	r = c.NewStreamReader(bytes.NewReader(bad))
	if _, _, err := r.Header(nil); err != nil {
		t.Fatal(err)
	}
	r.Next()
	_, err1 := r.Next()
	_, err2 := r.Next()
	if codeOf(err1) != CodeSignatureInvalid || err1 != err2 {
		t.Fatalf("errors %v, %v", err1, err2)
	}
}

// TestStreamTamper checks that every change to a signed stream is refused
// by a keyed reader with the code that names it.
func TestStreamTamper(t *testing.T) {
	c := NewCodec(testKey)
	hdr := streamHeader(FrameHandOff)
	data := []engine.Chunk{audioChunk(40), audioChunk(41), audioChunk(42)}
	good := writeStream(t, c, FrameHandOff, hdr, data, nil)
	other := writeStream(t, c, FrameHandOff, hdr, data, nil) // identical content, another nonce
	pre, fs := parseStream(t, good)
	_, ofs := parseStream(t, other)
	h, d0, d1, d2, end := fs[0], fs[1], fs[2], fs[3], fs[4]
	for _, tc := range []struct {
		name   string
		stream []byte
		code   string
	}{
		{"intact", joinStream(pre, h, d0, d1, d2, end), ""},
		{"two data frames swapped", joinStream(pre, h, d1, d0, d2, end), CodeSignatureInvalid},
		{"data frame dropped", joinStream(pre, h, d0, d2, end), CodeSignatureInvalid},
		{"data frame repeated", joinStream(pre, h, d0, d0, d1, d2, end), CodeSignatureInvalid},
		{"end frame dropped", joinStream(pre, h, d0, d1, d2), CodeTruncated},
		{"end frame repeated", joinStream(pre, h, d0, d1, d2, end, end), CodeBadFrame},
		{"data frame from another stream", joinStream(pre, h, d0, ofs[2], d2, end), CodeSignatureInvalid},
		{"header from another stream", joinStream(pre, ofs[0], d0, d1, d2, end), CodeSignatureInvalid},
		{"end frame from another stream", joinStream(pre, h, d0, d1, d2, ofs[4]), CodeSignatureInvalid},
		{"signed flag cleared", append([]byte{}, slices.Concat(pre[:5], []byte{0}, good[6:])...), CodeSignatureMissing},
		{"signed flag cleared and tags stripped", func() []byte {
			p := slices.Concat(pre[:5], []byte{0}, pre[6:])
			var stripped []streamFrame
			for _, f := range fs {
				stripped = append(stripped, streamFrame{kind: f.kind, body: f.body})
			}
			return joinStream(p, stripped...)
		}(), CodeSignatureMissing},
		{"byte after the end", append(bytes.Clone(good), 0), CodeBadFrame},
		{"frame after the end", joinStream(pre, h, d0, d1, d2, end, d0), CodeBadFrame},
		{"empty", nil, CodeTruncated},
		{"preamble alone", bytes.Clone(pre), CodeTruncated},
		{"not a stream", []byte(`{"error": {"message": "bad gateway"}}`), CodeBadMagic},
		{"a payload", func() []byte {
			b, err := c.marshal(base())
			if err != nil {
				t.Fatal(err)
			}
			return b
		}(), CodeBadMagic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := readStream(c, tc.stream, nil)
			if tc.code == "" {
				if err != io.EOF {
					t.Fatalf("intact stream: %v", err)
				}
				return
			}
			t.Logf("%v", err)
			if codeOf(err) != tc.code {
				t.Fatalf("error %v (%s); want %s", err, codeOf(err), tc.code)
			}
		})
	}

	t.Run("every cut", func(t *testing.T) {
		for n := range len(good) {
			_, _, _, err := readStream(c, good[:n], nil)
			if codeOf(err) != CodeTruncated || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("stream cut to %d of %d bytes: %v", n, len(good), err)
			}
		}
	})

	t.Run("every byte", func(t *testing.T) {
		// Where each byte lies, and the codes a change there may give.
		allowed := make([][]string, len(good))
		for i := range 4 {
			allowed[i] = []string{CodeBadMagic}
		}
		allowed[4] = []string{CodeUnsupportedVersion}
		for i := 6; i < preambleLen; i++ {
			allowed[i] = []string{CodeSignatureInvalid} // issued at, nonce
		}
		for i := 6; i < 6+keyIDLen; i++ {
			allowed[i] = []string{CodeKeyUnknown}
		}
		off := preambleLen
		for _, f := range fs {
			allowed[off] = []string{CodeSignatureInvalid} // kind
			for i := off + 1; i < off+frameHeadLen; i++ {
				allowed[i] = []string{CodeSignatureInvalid, CodeTooLarge, CodeTruncated} // length
			}
			for i := off + frameHeadLen; i < off+frameHeadLen+len(f.body)+tagLen; i++ {
				allowed[i] = []string{CodeSignatureInvalid} // body and tag
			}
			off += frameHeadLen + len(f.body) + tagLen
		}
		for i := range good {
			for _, mask := range []byte{0x01, 0x02, 0x80, 0xff} {
				b := bytes.Clone(good)
				b[i] ^= mask
				want := allowed[i]
				if i == 5 {
					want = []string{CodeUnsupportedVersion}
					if mask == flagSigned {
						want = []string{CodeSignatureMissing}
					}
				}
				_, _, _, err := readStream(c, b, nil)
				if !slices.Contains(want, codeOf(err)) {
					t.Fatalf("byte %d ^ %#02x: %v (%s); want one of %v", i, mask, err, codeOf(err), want)
				}
			}
		}
	})
}

// TestStreamGrammar checks streams whose tags are right but whose frames
// break the grammar or whose content is refused.
func TestStreamGrammar(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, nonceLen)
	hdr := func(kind FrameKind, change func(e *Envelope)) streamFrame {
		e := streamHeader(kind)
		if change != nil {
			change(e)
		}
		return streamFrame{kind: kind, body: headerBody(t, e)}
	}
	h := hdr(FrameHandOff, nil)
	data := func(c engine.Chunk) streamFrame { return streamFrame{kind: FrameData, body: chunkBody(t, c)} }
	end := streamFrame{kind: FrameEnd}
	fail := func(e StreamError) streamFrame { return streamFrame{kind: FrameError, body: errorBody(t, e)} }
	audio := data(audioChunk(3))
	for _, tc := range []struct {
		name   string
		frames []streamFrame
		want   *Expect
		code   string
		msg    string
	}{
		{"valid", []streamFrame{h, audio, end}, nil, "", ""},
		{"valid error", []streamFrame{h, audio, fail(StreamError{Status: 500, Message: "boom"})}, nil, "", ""},
		{"data first", []streamFrame{audio, end}, nil, CodeBadFrame, "starts with a frame of kind data"},
		{"end first", []streamFrame{end}, nil, CodeBadFrame, "starts with a frame of kind end"},
		{"error first", []streamFrame{fail(StreamError{Status: 500, Message: "boom"})}, nil, CodeBadFrame, "starts with a frame of kind error"},
		{"two headers", []streamFrame{h, audio, h, end}, nil, CodeBadFrame, "second header frame"},
		{"header then result", []streamFrame{h, hdr(FrameResult, nil), end}, nil, CodeBadFrame, "second header frame"},
		{"unknown kind", []streamFrame{h, {kind: 'Z', body: audio.body}, end}, nil, CodeBadFrame, "unknown kind 0x5a"},
		{"end with a body", []streamFrame{h, {kind: FrameEnd, body: []byte{0xc0}}}, nil, CodeBadFrame, "end frame has a body"},
		{"no end", []streamFrame{h, audio}, nil, CodeTruncated, "before its end frame"},
		{"header with data", []streamFrame{hdr(FrameHandOff, func(e *Envelope) { e.Data = []engine.Chunk{audioChunk(2)} }), end}, nil, CodeBadFrame, "holds 1 data chunks"},
		{"header with carried", []streamFrame{hdr(FrameHandOff, func(e *Envelope) {
			e.Carried = []StageOutput{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(2)}}}
		}), end}, nil, CodeBadFrame, "1 carried outputs"},
		{"result to another stage", []streamFrame{hdr(FrameResult, func(e *Envelope) { e.To = 2 }), end}, nil, CodeBadFrame, "result header has from 1 and to 2"},
		{"header not a map", []streamFrame{{kind: FrameHandOff, body: []byte{0x2a}}, end}, nil, CodeUndecodable, "payload stream header does not decode: want a map"},
		{"header of version 1", []streamFrame{{kind: FrameHandOff, body: func() []byte {
			b := headerBody(t, streamHeader(FrameHandOff))
			b[3] = 1 // {"v": 1, ...
			return b
		}()}, end}, nil, CodeUnsupportedVersion, "payload stream header has format version 1, this server reads version 3"},
		{"header without transfer id", []streamFrame{hdr(FrameHandOff, func(e *Envelope) { e.TransferID = "" }), end}, nil, CodeMissingField, "payload has no transfer_id"},
		{"hand-off for another stage", []streamFrame{h, end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 2, NumStages: 3}, CodeWrongStage, "payload stream is for stage 1, this server runs stage 2"},
		{"result of another stage", []streamFrame{hdr(FrameResult, nil), end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 2, NumStages: 3}, CodeWrongStage, "holds the result of stage 1, but the output of stage 2 was expected"},
		{"result of the expected stage", []streamFrame{hdr(FrameResult, nil), audio, end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, Input: engine.KindAudio}, "", ""},
		{"another pipeline", []streamFrame{h, end}, &Expect{Pipeline: "asr", Digest: testDigest, Stage: 1, NumStages: 3}, CodeWrongPipeline, `payload is for pipeline "tts"`},
		{"another digest", []streamFrame{h, end}, &Expect{Pipeline: "tts", Digest: [32]byte{1}, Stage: 1, NumStages: 3}, CodeWrongPipeline, "another configuration"},
		{"too few params", []streamFrame{h, end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, NumParams: 4}, CodeOutOfRange, "needs 4"},
		{"stage out of range", []streamFrame{hdr(FrameHandOff, func(e *Envelope) { e.Final = 5 }), end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3}, CodeOutOfRange, "final stage is 5"},
		{"wrong input kind", []streamFrame{h, audio, end}, &Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, Input: engine.KindFrames}, CodeBadChunk, "data frame 0 is audio, but stage 1 takes frames"},
		{"mixed kinds", []streamFrame{h, audio, data(textChunk("x")), end}, nil, CodeBadChunk, "data frame 1 is text, but the stream is audio"},
		{"invalid chunk", []streamFrame{h, data(engine.Chunk{Audio: &engine.Audio{Samples: []int16{1}}}), end}, nil, CodeBadChunk, "data frame 0: audio has sample rate 0"},
		{"empty chunk", []streamFrame{h, data(engine.Chunk{}), end}, nil, CodeBadChunk, "holds 0"},
		{"chunk not a map", []streamFrame{h, {kind: FrameData, body: []byte{0x91, 0xc0}}, end}, nil, CodeUndecodable, "payload stream data frame 0 does not decode: want a map, got an array"},
		{"chunk with extra bytes", []streamFrame{h, {kind: FrameData, body: append(bytes.Clone(audio.body), 0xc0)}, end}, nil, CodeUndecodable, "extra data after the chunk (1 bytes)"},
		{"samples truncated", []streamFrame{h, {kind: FrameData, body: audio.body[:len(audio.body)-1]}, end}, nil, CodeUndecodable, "audio.samples: the payload ends early"},
		{"error status 200", []streamFrame{h, fail(StreamError{Status: 200, Message: "ok"})}, nil, CodeBadFrame, "status 200"},
		{"error without message", []streamFrame{h, fail(StreamError{Status: 500, Code: "x"})}, nil, CodeBadFrame, "no message"},
		{"error with extra key", []streamFrame{h, {kind: FrameError, body: append([]byte{0x84}, append(errorBody(t, StreamError{Status: 500, Message: "m"})[1:], 0xa1, 'z', 0x01)...)}}, nil, CodeUndecodable, `unknown field "z"`},
		{"error then bytes", []streamFrame{h, fail(StreamError{Status: 500, Message: "boom"}), end}, nil, CodeBadFrame, "goes on after its error frame"},
	} {
		for _, key := range [][]byte{nil, testKey} {
			t.Run(fmt.Sprintf("%s/signed=%t", tc.name, key != nil), func(t *testing.T) {
				_, _, _, err := readStream(NewCodec(key), buildStream(key, nonce, tc.frames...), tc.want)
				var se *StreamError
				if tc.code == "" {
					if err != io.EOF && !errors.As(err, &se) {
						t.Fatalf("valid stream: %v", err)
					}
					return
				}
				t.Logf("%v", err)
				var pe *Error
				if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) {
					t.Fatalf("error %v (%s); want %s containing %q", err, codeOf(err), tc.code, tc.msg)
				}
			})
		}
	}
}

func TestStreamKeys(t *testing.T) {
	hdr := streamHeader(FrameHandOff)
	data := []engine.Chunk{textChunk("hi")}
	signed := writeStream(t, NewCodec(testKey), FrameHandOff, hdr, data, nil)
	unsigned := writeStream(t, NewCodec(nil), FrameHandOff, hdr, data, nil)
	otherKey := writeStream(t, NewCodec([]byte("another key")), FrameHandOff, hdr, data, nil)
	otherKeyKnownID := bytes.Clone(otherKey)
	copy(otherKeyKnownID[6:], referenceKeyID(testKey))
	for _, tc := range []struct {
		name   string
		reader *Codec
		stream []byte
		code   string
	}{
		{"keyless reads signed", NewCodec(nil), signed, ""},
		{"keyless reads unsigned", NewCodec(nil), unsigned, ""},
		{"keyed reads signed", NewCodec(testKey), signed, ""},
		{"keyed refuses unsigned", NewCodec(testKey), unsigned, CodeSignatureMissing},
		{"keyed refuses an unknown key", NewCodec(testKey), otherKey, CodeKeyUnknown},
		{"keyed refuses another key under a known id", NewCodec(testKey), otherKeyKnownID, CodeSignatureInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, got, err := readStream(tc.reader, tc.stream, nil)
			if tc.code == "" {
				if err != io.EOF || !reflect.DeepEqual(got, data) {
					t.Fatalf("read %v, %v", got, err)
				}
				return
			}
			if codeOf(err) != tc.code {
				t.Fatalf("error %v; want %s", err, tc.code)
			}
		})
	}
}

// failingReader returns the bytes of b, then err.
type failingReader struct {
	b   []byte
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestStreamReaderFailure checks that a failing reader's error reaches the
// caller wrapped, and that a stream that ends early is a truncation that
// wraps io.ErrUnexpectedEOF.
func TestStreamReaderFailure(t *testing.T) {
	c := NewCodec(testKey)
	b := writeStream(t, c, FrameHandOff, streamHeader(FrameHandOff), []engine.Chunk{audioChunk(100), audioChunk(100)}, nil)
	errReset := errors.New("connection reset by peer")
	for _, cut := range []int{0, 10, preambleLen + 3, len(b) / 2, len(b) - 1, len(b)} {
		for _, readErr := range []error{io.EOF, io.ErrUnexpectedEOF, errReset} {
			r := c.NewStreamReader(&failingReader{b: b[:cut], err: readErr})
			_, _, err := r.Header(nil)
			for err == nil {
				_, err = r.Next()
			}
			switch {
			case cut == len(b):
				if err != io.EOF {
					t.Errorf("whole stream, then %v: %v; want io.EOF", readErr, err)
				}
			case readErr == errReset:
				if !errors.Is(err, errReset) || codeOf(err) != "" {
					t.Errorf("cut at %d by %v: %v; want a wrapped reader error that is not an *Error", cut, readErr, err)
				}
			default:
				if codeOf(err) != CodeTruncated || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("cut at %d by %v: %v; want %s wrapping io.ErrUnexpectedEOF", cut, readErr, err, CodeTruncated)
				}
			}
		}
	}
}

// TestStreamSizeLimit checks that a frame longer than the limit is refused
// from its length alone, and that the writer refuses to write one.
func TestStreamSizeLimit(t *testing.T) {
	c := NewCodec(testKey, WithMaxSize(1000))
	// The body never comes: reading it would give CodeTruncated.
	pre := buildStream(testKey, make([]byte, nonceLen))
	head := append([]byte{byte(FrameHandOff)}, binary.BigEndian.AppendUint32(nil, 1001)...)
	_, _, err := c.NewStreamReader(bytes.NewReader(append(pre, head...))).Header(nil)
	if codeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "has a body of 1001 bytes, more than this server's limit of 1000 bytes") {
		t.Fatalf("Header = %v; want %s", err, CodeTooLarge)
	}

	var w countingWriter
	s := c.NewStreamWriter(&w)
	if err := s.Header(FrameHandOff, streamHeader(FrameHandOff)); err != nil {
		t.Fatal(err)
	}
	n := w.Len()
	big := audioChunk(600)
	if err := s.Data(&big); codeOf(err) != CodeTooLarge {
		t.Fatalf("Data of a chunk over the limit = %v; want %s", err, CodeTooLarge)
	}
	if w.Len() != n {
		t.Fatal("the writer wrote part of a frame over the limit")
	}
	small := audioChunk(10)
	if err := s.Data(&small); err != nil {
		t.Fatalf("Data after a refused frame: %v", err)
	}
	if err := s.End(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := readStream(c, w.Bytes(), nil); err != io.EOF {
		t.Fatalf("the stream around a refused frame does not read: %v", err)
	}
}

// TestStreamHugeLengthAllocatesLittle reads frames that claim bodies of
// tens of megabytes but hold a few bytes: each read must fail without
// allocating more than what arrived, give or take a growth step.
func TestStreamHugeLengthAllocatesLittle(t *testing.T) {
	for _, claim := range []uint32{DefaultMaxSize, 1 << 30} {
		t.Run(fmt.Sprint(claim), func(t *testing.T) {
			c := NewCodec(nil, WithMaxSize(int(claim)))
			b := buildStream(nil, make([]byte, nonceLen))
			b = append(b, byte(FrameHandOff))
			b = binary.BigEndian.AppendUint32(b, claim)
			b = append(b, make([]byte, 100)...)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 50 {
				if _, _, err := c.NewStreamReader(bytes.NewReader(b)).Header(nil); codeOf(err) != CodeTruncated {
					t.Fatalf("Header = %v; want %s", err, CodeTruncated)
				}
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / 50; per > 2*minGrow+(16<<10) {
				t.Errorf("each read allocated %d bytes", per)
			}
		})
	}
}

func TestStreamWriterMisuse(t *testing.T) {
	c := NewCodec(testKey)
	hdr := streamHeader(FrameHandOff)
	audio := audioChunk(4)
	text := textChunk("x")
	for _, tc := range []struct {
		name string
		do   func(s *StreamWriter) error
		msg  string
	}{
		{"data before header", func(s *StreamWriter) error { return s.Data(&audio) }, "Data before Header"},
		{"end before header", func(s *StreamWriter) error { return s.End() }, "End before Header"},
		{"fail before header", func(s *StreamWriter) error { return s.Fail(&StreamError{Status: 500, Message: "x"}) }, "Fail before Header"},
		{"two headers", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			return s.Header(FrameHandOff, hdr)
		}, "Header after Header"},
		{"data after end", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			s.End()
			return s.Data(&audio)
		}, "after the stream ended"},
		{"header kind", func(s *StreamWriter) error { return s.Header(FrameData, hdr) }, "not a data frame"},
		{"nil header", func(s *StreamWriter) error { return s.Header(FrameHandOff, nil) }, "without an envelope"},
		{"header with data", func(s *StreamWriter) error { return s.Header(FrameHandOff, base(audio)) }, "holds 1 data chunks"},
		{"invalid header", func(s *StreamWriter) error {
			e := streamHeader(FrameHandOff)
			e.RequestID = ""
			return s.Header(FrameHandOff, e)
		}, "payload has no request_id"},
		{"result to another stage", func(s *StreamWriter) error { return s.Header(FrameResult, base()) }, "result header has from 0 and to 1"},
		{"invalid chunk", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			return s.Data(&engine.Chunk{})
		}, "holds 0"},
		{"mixed kinds", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			s.Data(&audio)
			return s.Data(&text)
		}, "cannot write a chunk of text into a stream of audio"},
		{"invalid error", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			return s.Fail(&StreamError{Status: 302, Message: "elsewhere"})
		}, "status 302"},
		{"nil error", func(s *StreamWriter) error {
			s.Header(FrameHandOff, hdr)
			return s.Fail(nil)
		}, "nil stream error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(c.NewStreamWriter(io.Discard))
			if err == nil || codeOf(err) != "" || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v; want a plain error containing %q", err, tc.msg)
			}
		})
	}
}

// brokenWriter fails every Write.
type brokenWriter struct{ err error }

func (w brokenWriter) Write([]byte) (int, error) { return 0, w.err }

func TestStreamWriterFailure(t *testing.T) {
	broken := errors.New("broken pipe")
	s := NewCodec(testKey).NewStreamWriter(brokenWriter{broken})
	err := s.Header(FrameHandOff, streamHeader(FrameHandOff))
	if !errors.Is(err, broken) || codeOf(err) != "" {
		t.Fatalf("Header = %v; want the writer's error, wrapped", err)
	}
	if err2 := s.End(); err2 != err {
		t.Fatalf("End after a failed write = %v; want %v", err2, err)
	}
}

// TestStreamCheck checks the header against an Expect chosen after reading
// it, as a server of several stages does.
func TestStreamCheck(t *testing.T) {
	c := NewCodec(testKey)
	b := writeStream(t, c, FrameHandOff, streamHeader(FrameHandOff), []engine.Chunk{audioChunk(5), audioChunk(6)}, nil)
	open := func() (*StreamReader, *Envelope) {
		r := c.NewStreamReader(bytes.NewReader(b))
		_, e, err := r.Header(nil)
		if err != nil {
			t.Fatal(err)
		}
		return r, e
	}

	r, e := open()
	want := expect(e.To)
	want.Input = engine.KindAudio
	if err := r.Check(want); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(want); err == nil || codeOf(err) != "" {
		t.Fatalf("Check after Next = %v; want a plain error", err)
	}

	r, _ = open()
	if err := r.Check(expect(2)); codeOf(err) != CodeWrongStage {
		t.Fatalf("Check for another stage = %v; want %s", err, CodeWrongStage)
	}
	if _, err := r.Next(); codeOf(err) != CodeWrongStage {
		t.Fatalf("Next after a failed Check = %v; want the Check's error", err)
	}

	r, _ = open()
	want.Input = engine.KindFrames
	if err := r.Check(want); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); codeOf(err) != CodeBadChunk {
		t.Fatalf("Next of audio after Check for frames = %v; want %s", err, CodeBadChunk)
	}

	r, _ = open()
	if err := r.Check(Expect{}); err == nil || codeOf(err) != "" {
		t.Fatalf("Check with an invalid Expect = %v; want a plain error", err)
	}
	if err := c.NewStreamReader(bytes.NewReader(b)).Check(want); err == nil || codeOf(err) != "" {
		t.Fatalf("Check before Header = %v; want a plain error", err)
	}
}
