package payload

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestRoundTrip(t *testing.T) {
	carried := base(framesChunk(3, 4, 2))
	carried.Carried = []StageOutput{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(10)}}}
	traced := base(audioChunk(3))
	traced.Trace = testTrace
	for _, tc := range []struct {
		name string
		e    *Envelope
	}{
		{"text", base(textChunk("Hello"), textChunk(" world"))},
		{"frames", base(framesChunk(200, 26, 5), framesChunk(1, 26, 0))},
		{"segments", base(segmentsChunk())},
		{"audio", base(audioChunk(16000), audioChunk(1))},
		{"words", base(wordsChunk())},
		{"data", base(dataChunk("phonemes", "h@l'oU", map[string]string{"voice": "en-us"}), dataChunk("phonemes", "w'3:ld", nil))},
		{"empty data", base()},
		{"carried", carried},
		{"trace", traced},
		{"spans", base(spanned(framesChunk(3, 4, 2), 0, 0, "Hi."), spanned(framesChunk(2, 4, 2), 1, 4, "Is 😀 ok?"))},
		{"tensors", base(tensorsChunk())},
		{"image", base(imageChunk())},
		{"regions", base(regionsChunk())},
	} {
		for _, key := range [][]byte{nil, testKey} {
			t.Run(tc.name+map[bool]string{false: "/unsigned", true: "/signed"}[key != nil], func(t *testing.T) {
				c := NewCodec(key, WithClock(testClock))
				s, err := c.Encode(tc.e)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Decode(s, expect(1))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.e) {
					t.Errorf("round trip changed the envelope:\n got %+v\nwant %+v", got, tc.e)
				}
				prefix := map[bool]string{false: "T1NURwMA", true: "T1NURwMB"}[key != nil]
				if !strings.HasPrefix(s, prefix) {
					t.Errorf("payload starts %q, want %q", s[:8], prefix)
				}
				bin, err := c.marshal(tc.e)
				if err != nil {
					t.Fatal(err)
				}
				// Equal but for the seal, whose nonce is new each time.
				a, b := bin, unwrap(t, s)
				if key != nil {
					a, b = a[:len(a)-sealLen], b[:len(b)-sealLen]
				}
				if !bytes.Equal(a, b) {
					t.Error("Encode is not the base64 of Marshal")
				}
				got, err = c.unmarshal(bin, expect(1))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.e) {
					t.Errorf("binary round trip changed the envelope:\n got %+v\nwant %+v", got, tc.e)
				}
			})
		}
	}
}

// TestKeylessCodecReadsSignedPayloads pins the documented choice: without a
// key, tags are ignored.
func TestKeylessCodecReadsSignedPayloads(t *testing.T) {
	e := base(textChunk("hi"))
	s, err := NewCodec(testKey).Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCodec(nil).Decode(s, expect(1)); err != nil {
		t.Fatalf("keyless decode of a signed payload: %v", err)
	}
	// An empty key is no key.
	if NewCodec([]byte{}).ring.Load() != nil {
		t.Error("NewCodec([]byte{}) signs")
	}
}

func TestKeyIsCopied(t *testing.T) {
	key := bytes.Clone(testKey)
	c := NewCodec(key)
	key[0] ^= 1
	s, err := c.Encode(base(textChunk("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCodec(testKey).Decode(s, expect(1)); err != nil {
		t.Fatalf("the codec used the caller's mutated key: %v", err)
	}
}

func TestBadPayloads(t *testing.T) {
	valid := func(t testing.TB, e *Envelope) string {
		s, err := NewCodec(nil).Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	signed := func(t testing.TB, e *Envelope) string {
		s, err := NewCodec(testKey).Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	with := func(change func(e *Envelope)) func(t testing.TB) string {
		return func(t testing.TB) string {
			e := base(framesChunk(4, 3, 1))
			change(e)
			return raw(t, e, nil)
		}
	}
	editBody := func(change func(m map[string]any)) func(t testing.TB) string {
		return func(t testing.TB) string { return edit(t, base(textChunk("hi")), change) }
	}
	rawBody := func(version, flags byte, body []byte) func(t testing.TB) string {
		return func(t testing.TB) string { return wrap(frame(version, flags, body, nil)) }
	}
	for _, tc := range []struct {
		name    string
		payload func(t testing.TB) string
		codec   *Codec // nil: NewCodec(nil)
		want    Expect // zero: expect(1)
		code    string
		msg     string
	}{
		{"not base64", func(testing.TB) string { return "not base64!" }, nil, Expect{}, CodeNotBase64, "not URL-safe base64 without padding (bad data at character 3)"},
		{"standard base64 padding", func(t testing.TB) string {
			return base64.StdEncoding.EncodeToString(unwrap(t, valid(t, base(textChunk("hi!")))))
		}, nil, Expect{}, CodeNotBase64, "pass the stage_input of the previous /v1/run response unchanged"},
		{"line break", func(t testing.TB) string { s := valid(t, base(textChunk("hi"))); return s[:10] + "\n" + s[10:] }, nil, Expect{}, CodeNotBase64, "line breaks"},
		{"trailing bits", func(t testing.TB) string {
			var s string
			for _, text := range []string{"hi", "hi!", "hi!!"} {
				if s = valid(t, base(textChunk(text))); len(unwrap(t, s))%3 != 0 {
					break // the last character has unused bits
				}
			}
			last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", s[len(s)-1])
			return s[:len(s)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])
		}, nil, Expect{}, CodeNotBase64, "bad data"},
		{"too large", func(t testing.TB) string { return valid(t, base(audioChunk(1000))) }, NewCodec(nil, WithMaxSize(1000)), Expect{}, CodeTooLarge, "KiB, more than this server's limit of 1000 bytes"},
		{"too large before base64", func(testing.TB) string { return strings.Repeat("!", 1<<20) }, NewCodec(nil, WithMaxSize(1<<19)), Expect{}, CodeTooLarge, "limit of 512.0 KiB"},
		{"empty", func(testing.TB) string { return "" }, nil, Expect{}, CodeBadMagic, "not an omnistage payload"},
		{"bad magic", func(testing.TB) string { return wrap([]byte("OSTX\x01\x00\x80")) }, nil, Expect{}, CodeBadMagic, "not an omnistage payload"},
		{"short header", func(testing.TB) string { return wrap([]byte("OSTG\x01")) }, nil, Expect{}, CodeBadMagic, "not an omnistage payload"},
		{"version 2", rawBody(2, 0, []byte{0x80}), nil, Expect{}, CodeUnsupportedVersion, "format version 2, this server reads version 3"},
		{"version 4", rawBody(4, 0, []byte{0x80}), nil, Expect{}, CodeUnsupportedVersion, "format version 4, this server reads version 3"},
		{"version 0", rawBody(0, 0, []byte{0x80}), nil, Expect{}, CodeUnsupportedVersion, "format version 0, this server reads version 3"},
		{"short version 3 header", func(testing.TB) string { return wrap([]byte("OSTG\x03\x00\x00")) }, nil, Expect{}, CodeUndecodable, "too short to hold its header"},
		{"unknown flags", rawBody(FormatVersion, 0x04, []byte{0x80}), nil, Expect{}, CodeUnsupportedVersion, "flags 0x04"},
		{"unsigned to keyed server", func(t testing.TB) string { return valid(t, base(textChunk("hi"))) }, NewCodec(testKey), Expect{}, CodeSignatureMissing, "only accepts signed payloads"},
		{"signed with an unknown key", func(t testing.TB) string {
			s, err := NewCodec([]byte("another key")).Encode(base(textChunk("hi")))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, NewCodec(testKey), Expect{}, CodeKeyUnknown, "signed with payload key " + hexID([]byte("another key")) + ", which this server does not hold (its keys: " + hexID(testKey) + ")"},
		{"signed with another key under a known id", func(t testing.TB) string {
			b := unwrap(t, rawSigned(t, []byte("another key"), base(textChunk("hi"))))
			copy(b[6:], referenceKeyID(testKey))
			return wrap(b)
		}, NewCodec(testKey), Expect{}, CodeSignatureInvalid, "altered, or signed with another key"},
		{"key id altered", func(t testing.TB) string {
			b := unwrap(t, signed(t, base(textChunk("hi"))))
			copy(b[6:], referenceKeyID(testKey))
			b[6] ^= 1
			return wrap(b)
		}, NewCodec(testKey), Expect{}, CodeKeyUnknown, "which this server does not hold"},
		{"issued-at altered", func(t testing.TB) string {
			b := unwrap(t, signed(t, base(textChunk("hi"))))
			b[headerLen-1] ^= 1
			return wrap(b)
		}, NewCodec(testKey), Expect{}, CodeSignatureInvalid, "signature does not match"},
		{"unsigned with a key id", func(t testing.TB) string {
			b := unwrap(t, valid(t, base(textChunk("hi"))))
			b[6] = 1
			return wrap(b)
		}, nil, Expect{}, CodeUndecodable, "not signed but names the payload key 0100000000000000"},
		{"signed body altered", func(t testing.TB) string {
			b := unwrap(t, signed(t, base(textChunk("hi"))))
			b[len(b)-sealLen-1] ^= 'h' ^ 'H'
			return wrap(b)
		}, NewCodec(testKey), Expect{}, CodeSignatureInvalid, "signature does not match"},
		{"tag stripped and flag cleared", func(t testing.TB) string {
			b := unwrap(t, signed(t, base(textChunk("hi"))))
			b = b[:len(b)-sealLen]
			b[5] = 0
			return wrap(b)
		}, NewCodec(testKey), Expect{}, CodeSignatureMissing, "not signed"},
		{"tag truncated", func(t testing.TB) string {
			b := append([]byte(magic), FormatVersion, flagSigned)
			return wrap(append(append(b, stamp(testKey, testIssued)...), 1, 2, 3))
		}, NewCodec(testKey), Expect{}, CodeSignatureInvalid, "too short to hold its signature"},
		{"body not a map", rawBody(FormatVersion, 0, []byte{0x2a}), nil, Expect{}, CodeUndecodable, "want a map, got an integer"},
		{"body truncated", func(t testing.TB) string {
			b := unwrap(t, valid(t, base(audioChunk(100))))
			return wrap(b[:len(b)-7])
		}, nil, Expect{}, CodeUndecodable, "data[0].audio.samples: the payload ends early"},
		{"stray bytes", func(t testing.TB) string {
			return wrap(append(unwrap(t, valid(t, base(textChunk("hi")))), 0xc0))
		}, nil, Expect{}, CodeUndecodable, "extra data after the envelope (1 bytes)"},
		{"unknown key", editBody(func(m map[string]any) { m["zz"] = 1 }), nil, Expect{}, CodeUndecodable, `unknown field "zz"`},
		{"long unknown key", editBody(func(m map[string]any) { m[strings.Repeat("k", 40)] = 1 }), nil, Expect{}, CodeUndecodable, "unknown field of 40 bytes"},
		{"repeated key", func(t testing.TB) string {
			b := body(t, base(textChunk("hi")))
			b[0]++ // one more entry in the fixmap
			b = append(b, 0xa1, 'x', 0xa2, 'y', 'z')
			return wrap(frame(FormatVersion, 0, b, nil))
		}, nil, Expect{}, CodeUndecodable, `field "transfer_id" appears twice`},
		{"to is a string", editBody(func(m map[string]any) { m["t"] = "1" }), nil, Expect{}, CodeUndecodable, "to: want an integer, got a string"},
		{"to is nil", editBody(func(m map[string]any) { m["t"] = nil }), nil, Expect{}, CodeUndecodable, "to: want an integer, got nil"},
		{"to is a float", editBody(func(m map[string]any) { m["t"] = 1.0 }), nil, Expect{}, CodeUndecodable, "to: want an integer, got a float"},
		{"to is huge", editBody(func(m map[string]any) { m["t"] = uint64(math.MaxUint64) }), nil, Expect{}, CodeUndecodable, "to: 18446744073709551615 does not fit in 32 bits"},
		{"digest too short", editBody(func(m map[string]any) { m["dg"] = []byte{1, 2, 3} }), nil, Expect{}, CodeUndecodable, "digest: want 32 bytes, got 3"},
		{"params entry a string", editBody(func(m map[string]any) { m["sp"] = []any{"{}", nil, nil} }), nil, Expect{}, CodeUndecodable, "sampling_params[0]: want binary data, got a string"},
		{"samples as array", editBody(func(m map[string]any) {
			m["d"] = []any{map[string]any{"a": map[string]any{"rate": 16000, "samples": []int16{1, 2}}}}
		}), nil, Expect{}, CodeUndecodable, "data[0].audio.samples: want binary data, got an array"},
		{"odd sample bytes", editBody(func(m map[string]any) {
			m["d"] = []any{map[string]any{"a": map[string]any{"rate": 16000, "samples": []byte{1, 2, 3}}}}
		}), nil, Expect{}, CodeUndecodable, "3 bytes are not a whole number of int16 samples"},
		{"frame shift float64", editBody(func(m map[string]any) {
			m["d"] = []any{map[string]any{"f": map[string]any{"voice": "", "channels": 1, "params": []byte{}, "str_channels": 0, "str": []byte{}, "frame_shift": 0.005}}}
		}), nil, Expect{}, CodeUndecodable, "data[0].frames.frame_shift: want a float32, got a float"},
		{"huge bin length", func(t testing.TB) string {
			b := body(t, base())
			// Replace the empty data array at the end by a chunk whose
			// samples claim 4 GiB.
			b = append(b[:len(b)-1], 0x91, 0x81, 0xa1, 'a', 0x82, 0xa4, 'r', 'a', 't', 'e', 0x01, 0xa7, 's', 'a', 'm', 'p', 'l', 'e', 's', 0xc6, 0xff, 0xff, 0xff, 0xfe)
			return wrap(frame(FormatVersion, 0, b, nil))
		}, nil, Expect{}, CodeUndecodable, "data[0].audio.samples: the payload ends early"},
		{"huge array length", func(t testing.TB) string {
			b := body(t, base())
			b = append(b[:len(b)-1], 0xdd, 0xff, 0xff, 0xff, 0xff)
			return wrap(frame(FormatVersion, 0, b, nil))
		}, nil, Expect{}, CodeUndecodable, "data: the payload ends early"},
		{"body version 2", editBody(func(m map[string]any) { m["v"] = 2 }), nil, Expect{}, CodeUndecodable, "header says format version 3 but its body says 2"},
		{"trace is an integer", editBody(func(m map[string]any) { m["tp"] = 1 }), nil, Expect{}, CodeUndecodable, "trace: want a string, got an integer"},
		{"trace not UTF-8", with(func(e *Envelope) { e.Trace = "00-\xff" }), nil, Expect{}, CodeUndecodable, "payload's trace is not valid UTF-8"},
		{"no transfer id key", editBody(func(m map[string]any) { delete(m, "x") }), nil, Expect{}, CodeMissingField, "payload has no transfer_id field"},
		{"no audio rate key", editBody(func(m map[string]any) {
			m["d"] = []any{map[string]any{"a": map[string]any{"samples": []byte{1, 2}}}}
		}), nil, Expect{}, CodeMissingField, "payload has no data[0].audio.rate field"},
		{"empty transfer id", with(func(e *Envelope) { e.TransferID = "" }), nil, Expect{}, CodeMissingField, "payload has no transfer_id"},
		{"empty request id", with(func(e *Envelope) { e.RequestID = "" }), nil, Expect{}, CodeMissingField, "payload has no request_id"},
		{"zero digest", with(func(e *Envelope) { e.Digest = [32]byte{} }), nil, Expect{}, CodeMissingField, "payload has no digest"},
		{"no outputs", with(func(e *Envelope) { e.Outputs = nil }), nil, Expect{}, CodeMissingField, "payload has no output_modalities"},
		{"to out of range", with(func(e *Envelope) { e.To = 3 }), nil, Expect{}, CodeOutOfRange, `payload's to stage is 3, but pipeline "tts" has stage ids 0..2`},
		{"from negative", with(func(e *Envelope) { e.From = -1 }), nil, Expect{}, CodeOutOfRange, "payload's from stage is -1"},
		{"final out of range", with(func(e *Envelope) { e.Final = 7 }), nil, Expect{}, CodeOutOfRange, "final stage is 7"},
		{"too few params", with(func(e *Envelope) { e.Params = e.Params[:2] }), nil, Expect{}, CodeOutOfRange, `payload has 2 sampling_params entries, but pipeline "tts" needs 3, one per stage id`},
		{"params length from Expect", with(func(*Envelope) {}), nil, Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, NumParams: 4}, CodeOutOfRange, "needs 4"},
		{"params not an object", with(func(e *Envelope) { e.Params[1] = json.RawMessage(`[1]`) }), nil, Expect{}, CodeUndecodable, "sampling_params[1] is not a JSON object or null"},
		{"params not JSON", with(func(e *Envelope) { e.Params[1] = json.RawMessage(`{"a":`) }), nil, Expect{}, CodeUndecodable, "sampling_params[1] is not a JSON object or null"},
		{"unknown modality", with(func(e *Envelope) { e.Outputs = []string{"audio", "video"} }), nil, Expect{}, CodeOutOfRange, `output_modalities[1]: unknown output modality "video"`},
		{"carried unselected", with(func(e *Envelope) {
			e.Carried = []StageOutput{{Stage: 0, Kind: engine.KindFrames, Chunks: []engine.Chunk{framesChunk(1, 1, 0)}}}
		}), nil, Expect{}, CodeOutOfRange, `carried[0] is "frames", which is not one of the request's output_modalities (audio, timestamps)`},
		{"carried stage out of range", with(func(e *Envelope) {
			e.Carried = []StageOutput{{Stage: 9, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(2)}}}
		}), nil, Expect{}, CodeOutOfRange, "carried[0] comes from stage 9"},
		{"wrong stage", with(func(e *Envelope) { e.From, e.To = 1, 2 }), nil, Expect{}, CodeWrongStage, "payload is for stage 2, this server runs stage 1"},
		{"wrong pipeline", with(func(e *Envelope) { e.Pipeline = "asr" }), nil, Expect{}, CodeWrongPipeline, `payload is for pipeline "asr", this server runs pipeline "tts"`},
		{"changed route", with(func(e *Envelope) { e.Digest[0] ^= 1 }), nil, Expect{}, CodeWrongPipeline, `another configuration of pipeline "tts": its stages or route changed`},
		{"ragged frames", with(func(e *Envelope) {
			e.Data = append(e.Data, engine.Chunk{Frames: &engine.Frames{Channels: 26, Params: make([]float32, 27), FrameShift: 0.005}})
		}), nil, Expect{}, CodeBadChunk, "payload data[1]: frames have 27 params, not a whole number of frames of 26 channels"},
		{"zero channels", with(func(e *Envelope) { e.Data[0].Frames.Channels = 0 }), nil, Expect{}, CodeBadChunk, "data[0]: frames have 0 channels"},
		{"short str", with(func(e *Envelope) { e.Data[0].Frames.Str = e.Data[0].Frames.Str[1:] }), nil, Expect{}, CodeBadChunk, "frames have 3 excitation strengths, but 4 frames of 1 str_channels need 4"},
		{"NaN param", with(func(e *Envelope) { e.Data[0].Frames.Params[5] = float32(math.NaN()) }), nil, Expect{}, CodeBadChunk, "frames params[5] is NaN"},
		{"zero frame shift", with(func(e *Envelope) { e.Data[0].Frames.FrameShift = 0 }), nil, Expect{}, CodeBadChunk, "frame_shift 0"},
		{"tensor data short", with(func(e *Envelope) {
			c := tensorsChunk()
			c.Tensors.Tensors[0].Data = c.Tensors.Tensors[0].Data[4:]
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `data[0]: tensor "x": shape [1 3 2 2] of float32 makes 48 bytes, but its data has 44`},
		{"tensor huge shape", with(func(e *Envelope) {
			c := tensorsChunk()
			c.Tensors.Tensors[1].Shape = []int64{1 << 20, 1 << 20}
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `tensor "ids": shape [1048576 1048576] has more than 67108864 elements`},
		{"tensor unknown type", with(func(e *Envelope) {
			c := tensorsChunk()
			c.Tensors.Tensors[1].Type = "complex64"
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `tensor "ids": unknown element type "complex64"`},
		{"tensors named twice", with(func(e *Envelope) {
			c := tensorsChunk()
			c.Tensors.Tensors[1].Name = "x"
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `two tensors named "x"`},
		{"image format", with(func(e *Envelope) {
			c := imageChunk()
			c.Image.Format = "gif"
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `image format "gif"; want png, jpeg or webp`},
		{"crop pixels short", with(func(e *Envelope) {
			c := regionsChunk()
			c.Regions.Regions[0].Crop.Pixels = c.Regions.Regions[0].Crop.Pixels[1:]
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, "regions[0]: a crop of 2×1 RGB pixels has 5 bytes, not 6"},
		{"confidences for another text", with(func(e *Envelope) {
			c := regionsChunk()
			c.Regions.Regions[1].Text = "Hello"
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, "regions[1]: 2 confidences for a text of 5 code points"},
		{"box not finite", with(func(e *Envelope) {
			c := regionsChunk()
			c.Regions.Regions[1].Box[2].Y = float32(math.Inf(1))
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, "regions[1]: its box has a corner that is not a finite number"},
		{"zero sample rate", with(func(e *Envelope) { e.Data = []engine.Chunk{audioChunk(2), {Audio: &engine.Audio{}}} }), nil, Expect{}, CodeBadChunk, "payload data[1]: audio has sample rate 0"},
		{"data of a built-in kind", with(func(e *Envelope) { e.Data = []engine.Chunk{dataChunk("audio", "x", nil)} }), nil, Expect{}, CodeBadChunk, "data[0]: data of kind audio, a built-in kind"},
		{"data with too much meta", with(func(e *Envelope) {
			e.Data = []engine.Chunk{dataChunk("phonemes", "x", map[string]string{"k": strings.Repeat("v", engine.MaxMetaBytes)})}
		}), nil, Expect{}, CodeBadChunk, "data[0]: data 4097 bytes of metadata; the limit is 4096"},
		{"empty chunk", with(func(e *Envelope) { e.Data = []engine.Chunk{{}} }), nil, Expect{}, CodeBadChunk, "data[0]: a chunk holds exactly one of text, frames, segments, audio, words, tensors, image, regions or data; this one holds 0"},
		{"two fields", with(func(e *Envelope) { e.Data[0].Text = &engine.Text{Text: "x"} }), nil, Expect{}, CodeBadChunk, "this one holds 2"},
		{"span alone", with(func(e *Envelope) { e.Data = []engine.Chunk{{Span: &engine.Span{End: 1, Text: "x"}}} }), nil, Expect{}, CodeBadChunk, "this one holds 0"},
		{"span of a negative sentence", with(func(e *Envelope) { e.Data[0].Span = &engine.Span{Sentence: -1} }), nil, Expect{}, CodeBadChunk, "data[0]: span of sentence -1"},
		{"span backwards", with(func(e *Envelope) { e.Data[0].Span = &engine.Span{Start: 5, End: 4} }), nil, Expect{}, CodeBadChunk, "data[0]: span of characters 5..4"},
		{"span text too long", with(func(e *Envelope) { e.Data[0].Span = &engine.Span{Start: 2, End: 4, Text: "abc"} }), nil, Expect{}, CodeBadChunk, "span text has 3 code points, but the span covers 2 (2..4)"},
		{"span text not UTF-8", with(func(e *Envelope) { e.Data[0].Span = &engine.Span{End: 1, Text: "\xff"} }), nil, Expect{}, CodeBadChunk, "span text is not valid UTF-8"},
		{"mixed kinds", with(func(e *Envelope) { e.Data = append(e.Data, textChunk("x")) }), nil, Expect{}, CodeBadChunk, "payload data[1] is text, but the stream is frames"},
		{"ragged segments", with(func(e *Envelope) {
			c := segmentsChunk()
			c.Segments.Cluster = c.Segments.Cluster[1:]
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, "segments have 6 names, 6 ends and 5 cluster flags"},
		{"backwards word", with(func(e *Envelope) {
			c := wordsChunk()
			c.Words.Words[1].EndMs = 10
			e.Data = []engine.Chunk{c}
		}), nil, Expect{}, CodeBadChunk, `words[1] "wörld" spans 430..10 ms`},
		{"invalid UTF-8 text", with(func(e *Envelope) { e.Data = []engine.Chunk{textChunk("\xff")} }), nil, Expect{}, CodeBadChunk, "text is not valid UTF-8"},
		{"bad carried chunk", with(func(e *Envelope) {
			e.Carried = []StageOutput{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(2), textChunk("x")}}}
		}), nil, Expect{}, CodeBadChunk, "payload carried[0].chunks[1] is text, but the stream is audio"},
		{"wrong input kind", with(func(*Envelope) {}), nil, Expect{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, Input: engine.KindAudio}, CodeBadChunk, "payload data[0] is frames, but stage 1 takes audio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.codec
			if c == nil {
				c = NewCodec(nil)
			}
			want := tc.want
			if want.NumStages == 0 {
				want = expect(1)
			}
			s := tc.payload(t)
			e, err := c.Decode(s, want)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode = %v, %v; want an *Error", e, err)
			}
			t.Logf("%s: %s", pe.Code, pe.Message)
			if pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) {
				t.Errorf("Decode error = %s: %q\nwant %s containing %q", pe.Code, pe.Message, tc.code, tc.msg)
			}
			// Unmarshal makes the same checks on the binary payload.
			if bin, err := stdB64.DecodeString(s); err == nil && tc.code != CodeNotBase64 {
				e, err := c.unmarshal(bin, want)
				if !errors.As(err, &pe) {
					t.Fatalf("Unmarshal = %v, %v; want an *Error", e, err)
				}
				if pe.Code != tc.code {
					t.Errorf("Unmarshal error = %s: %q; want %s", pe.Code, pe.Message, tc.code)
				}
			}
		})
	}
}

// TestSignedAlterations checks that with a key every change to a valid
// payload is refused: every byte of the binary payload, flipped in several
// ways, and every character of its text.
func TestSignedAlterations(t *testing.T) {
	c := NewCodec(testKey)
	e := base(framesChunk(3, 2, 1))
	e.Carried = []StageOutput{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(5)}}}
	s, err := c.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decode(s, expect(1)); err != nil {
		t.Fatal(err)
	}
	bin := unwrap(t, s)
	for i := range bin {
		for _, mask := range []byte{0x01, 0x02, 0x10, 0x80, 0xff} {
			b := bytes.Clone(bin)
			b[i] ^= mask
			if _, err := c.Decode(wrap(b), expect(1)); err == nil {
				t.Fatalf("byte %d ^ %#02x: altered payload accepted", i, mask)
			}
		}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(s) {
		for _, sub := range []byte{alphabet[(strings.IndexByte(alphabet, s[i])+1)%64], alphabet[(strings.IndexByte(alphabet, s[i])+32)%64], '+', '='} {
			alt := s[:i] + string(sub) + s[i+1:]
			if _, err := c.Decode(alt, expect(1)); err == nil {
				t.Fatalf("character %d %q -> %q: altered payload accepted", i, s[i], sub)
			}
		}
	}
	for _, cut := range []int{1, tagLen, sealLen, len(bin) / 2} {
		if _, err := c.Decode(wrap(bin[:len(bin)-cut]), expect(1)); err == nil {
			t.Fatalf("payload cut by %d bytes accepted", cut)
		}
	}
}

func TestEncode(t *testing.T) {
	t.Run("invalid envelope is a bug, not an *Error", func(t *testing.T) {
		e := base(textChunk("x"))
		e.TransferID = ""
		_, err := NewCodec(nil).Encode(e)
		var pe *Error
		if err == nil || errors.As(err, &pe) {
			t.Fatalf("Encode = %v; want a plain error", err)
		}
		if !strings.Contains(err.Error(), "payload has no transfer_id") {
			t.Errorf("Encode error %q does not say why", err)
		}
	})
	t.Run("other version", func(t *testing.T) {
		e := base(textChunk("x"))
		e.Version = FormatVersion + 1
		if _, err := NewCodec(nil).Encode(e); err == nil {
			t.Fatal("Encode of an envelope of another version succeeded")
		}
	})
	t.Run("zero version", func(t *testing.T) {
		e := base(textChunk("x"))
		e.Version = 0
		s, err := NewCodec(nil).Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewCodec(nil).Decode(s, expect(1))
		if err != nil || got.Version != FormatVersion {
			t.Fatalf("Decode = %+v, %v; want version %d", got, err, FormatVersion)
		}
		if e.Version != 0 {
			t.Error("Encode modified its envelope")
		}
	})
	t.Run("too large", func(t *testing.T) {
		_, err := NewCodec(nil, WithMaxSize(4096)).Encode(base(textChunk("x"), textChunk(strings.Repeat("y", 5000))))
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeTooLarge {
			t.Fatalf("Encode = %v; want %s", err, CodeTooLarge)
		}
		if !strings.Contains(pe.Message, "the output of stage 0 makes a payload of 5.") {
			t.Errorf("message %q", pe.Message)
		}
	})
	t.Run("nil", func(t *testing.T) {
		if _, err := NewCodec(nil).Encode(nil); err == nil {
			t.Fatal("Encode(nil) succeeded")
		}
	})
}

func TestDecodeBadExpect(t *testing.T) {
	s, err := NewCodec(nil).Encode(base(textChunk("x")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Expect{
		{Pipeline: "tts", Digest: testDigest, Stage: 0, NumStages: 0},
		{Pipeline: "tts", Digest: testDigest, Stage: 3, NumStages: 3},
		{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, NumParams: -1},
		{Pipeline: "", Digest: testDigest, Stage: 1, NumStages: 3},
		{Pipeline: "tts", Digest: testDigest, Stage: 1, NumStages: 3, Input: "Not a kind"},
		{Pipeline: "tts", Stage: 1, NumStages: 3},
	} {
		_, err := NewCodec(nil).Decode(s, want)
		var pe *Error
		if err == nil || errors.As(err, &pe) {
			t.Errorf("Decode with %+v = %v; want a plain error (a bug)", want, err)
		}
	}
}

func TestNextAndCarry(t *testing.T) {
	// talker -> vocoder -> enhance -> aligner, audio and timestamps selected.
	talker := base(framesChunk(2, 2, 0))
	talker.Params = append(talker.Params, nil)
	vocoded := []engine.Chunk{audioChunk(4)}
	enhanced := []engine.Chunk{audioChunk(6)}

	// The vocoder consumed frames, which are not selected.
	toEnhance := talker.Next(2, vocoded, false)
	if toEnhance.From != 1 || toEnhance.To != 2 || len(toEnhance.Carried) != 0 || !reflect.DeepEqual(toEnhance.Data, vocoded) {
		t.Fatalf("Next = %+v", toEnhance)
	}
	if toEnhance.TransferID != talker.TransferID || !reflect.DeepEqual(toEnhance.Params, talker.Params) || talker.To != 1 {
		t.Fatal("Next lost the chain's fields or modified its receiver")
	}
	// Enhance consumed the vocoder's audio, a selected output.
	toAligner := toEnhance.Next(3, enhanced, true)
	if want := []StageOutput{{Stage: 1, Kind: engine.KindAudio, Chunks: vocoded}}; !reflect.DeepEqual(toAligner.Carried, want) {
		t.Fatalf("Carried = %+v, want %+v", toAligner.Carried, want)
	}
	// The aligner answers with Carry(true): enhance's audio replaces the
	// vocoder's.
	answer := toAligner.Carry(true)
	if want := []StageOutput{{Stage: 2, Kind: engine.KindAudio, Chunks: enhanced}}; !reflect.DeepEqual(answer, want) {
		t.Fatalf("Carry = %+v, want %+v", answer, want)
	}
	if got := toAligner.Carry(false); !reflect.DeepEqual(got, toAligner.Carried) {
		t.Fatalf("Carry(false) = %+v", got)
	}
	// The envelope Next builds is valid and encodes.
	c := NewCodec(testKey)
	s, err := c.Encode(toAligner)
	if err != nil {
		t.Fatal(err)
	}
	want := Expect{Pipeline: "tts", Digest: testDigest, Stage: 3, NumStages: 4, Input: engine.KindAudio}
	got, err := c.Decode(s, want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, toAligner) {
		t.Fatalf("round trip of Next's envelope:\n got %+v\nwant %+v", got, toAligner)
	}
}

func TestParamsFor(t *testing.T) {
	e := base()
	for id, want := range map[int]string{0: `{"voice":"slt"}`, 1: "", 2: "", 3: "", -1: ""} {
		if got := string(e.paramsFor(id)); got != want {
			t.Errorf("paramsFor(%d) = %q, want %q", id, got, want)
		}
	}
}

// TestGolden pins the wire format: a change to the encoding of this
// envelope changes the golden file, and needs a new FormatVersion.
func TestGolden(t *testing.T) {
	e := base(framesChunk(2, 3, 1))
	e.Carried = []StageOutput{{Stage: 0, Kind: engine.KindTimestamps, Chunks: []engine.Chunk{wordsChunk()}}}
	e.Data = append(e.Data, framesChunk(1, 3, 1))
	e.Trace = testTrace
	for _, tc := range []struct {
		file string
		key  []byte
	}{{"v3-unsigned.golden", nil}, {"v3-signed.golden", testKey}} {
		t.Run(tc.file, func(t *testing.T) {
			c := NewCodec(tc.key, WithClock(testClock))
			s, err := c.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, []byte(s+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.TrimSuffix(string(golden), "\n")
			// A signed payload ends with its seal, which starts with a
			// fresh nonce: all before it is the same each time.
			got, golden := unwrap(t, s), unwrap(t, want)
			if tc.key != nil {
				got, golden = got[:len(got)-sealLen], golden[:max(0, len(golden)-sealLen)]
			}
			if !bytes.Equal(got, golden) {
				t.Errorf("Encode changed the wire format (rerun with -update only along with a FormatVersion bump):\n got %s\nwant %s", s, want)
			}
			dec, err := c.Decode(want, expect(1))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, e) {
				t.Errorf("golden payload decodes to %+v", dec)
			}
		})
	}
	// A payload of a previous format version is refused, not misread.
	for _, file := range []string{"v1-unsigned.golden", "v1-signed.golden", "v2-unsigned.golden", "v2-signed.golden"} {
		t.Run(file, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			msg := fmt.Sprintf("format version %c, this server reads version %d", file[1], FormatVersion)
			_, err = NewCodec(testKey).Decode(strings.TrimSuffix(string(golden), "\n"), expect(1))
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != CodeUnsupportedVersion || !strings.Contains(pe.Message, msg) {
				t.Fatalf("Decode of %s = %v; want %s: %s", file, err, CodeUnsupportedVersion, msg)
			}
		})
	}
}

// TestHugeLengthsAllocateLittle decodes payloads whose string, bin, array
// and map headers claim about 4 GiB: each decode must fail fast without
// allocating more than the payload holds, however often it is repeated.
func TestHugeLengthsAllocateLittle(t *testing.T) {
	huge := []byte{0xff, 0xff, 0xff, 0xf0}
	prefix := []byte{0x8d, 0xa1, 'v', FormatVersion, 0xa1, 'p'} // {"v": 3, "p": ...
	for _, tc := range []struct {
		name string
		code byte
	}{{"str32", 0xdb}, {"bin32", 0xc6}, {"array32", 0xdd}, {"map32", 0xdf}} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(append(append(bytes.Clone(prefix), tc.code), huge...), make([]byte, 64)...)
			s := wrap(frame(FormatVersion, 0, b, nil))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 50 {
				if _, err := NewCodec(nil).Decode(s, expect(1)); err == nil {
					t.Fatal("decoded")
				}
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / 50; per > 64<<10 {
				t.Errorf("each decode allocated %d bytes", per)
			}
		})
	}
}

func TestEncodeRefusesWideIntegers(t *testing.T) {
	wide := int64(math.MaxInt32) + 1
	if int64(int(wide)) != wide {
		t.Skip("int has 32 bits")
	}
	e := base(audioChunk(2))
	e.Data[0].Audio.SampleRate = int(wide)
	_, err := NewCodec(nil).Encode(e)
	var pe *Error
	if err == nil || errors.As(err, &pe) || !strings.Contains(err.Error(), "does not fit in 32 bits") {
		t.Fatalf("Encode = %v; want a plain error about 32 bits", err)
	}
}
