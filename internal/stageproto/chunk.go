package stageproto

// Engine chunks to and from the header fields and data of input and
// output messages.

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// EncodeChunk returns the header fields and data of c.
func EncodeChunk(c engine.Chunk) (ChunkHeader, []byte, error) {
	switch {
	case c.Text != nil:
		return ChunkHeader{Kind: string(engine.KindText)}, []byte(c.Text.Text), nil
	case c.Audio != nil:
		a := c.Audio
		data := make([]byte, 2*len(a.Samples))
		for i, s := range a.Samples {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(s))
		}
		return ChunkHeader{Kind: string(engine.KindAudio), SampleRate: a.SampleRate, EndOfSentence: a.EndOfSentence}, data, nil
	case c.Words != nil:
		words := c.Words.Words
		if words == nil {
			words = []engine.Word{}
		}
		return ChunkHeader{Kind: string(engine.KindTimestamps), Words: words}, nil, nil
	case c.Frames != nil:
		f := c.Frames
		data := make([]byte, 0, 4*(len(f.Params)+len(f.Str)))
		data = appendFloats(appendFloats(data, f.Params), f.Str)
		return ChunkHeader{Kind: string(engine.KindFrames), Voice: f.Voice, Channels: f.Channels, StrChannels: f.StrChannels, FrameShift: f.FrameShift}, data, nil
	case c.Segments != nil:
		s := c.Segments
		return ChunkHeader{Kind: string(engine.KindSegments), Voice: s.Voice, Names: s.Names, Ends: s.Ends, Cluster: s.Cluster, TargetPos: s.TargetPos, TargetF0: s.TargetF0}, nil, nil
	case c.Data != nil:
		return ChunkHeader{Kind: string(c.Data.Kind), Meta: c.Data.Meta}, c.Data.Bytes, nil
	}
	return ChunkHeader{}, nil, fmt.Errorf("stage protocol: an empty chunk")
}

// DecodeChunk returns the chunk of an input or output message's header
// fields and data. A kind that is not built in is a Data chunk; whether
// the stage may carry it is the caller's to check. A chunk whose fields
// or data do not fit its kind is an *engine.InputError.
func DecodeChunk(h *ChunkHeader, data []byte) (engine.Chunk, error) {
	bad := func(format string, args ...any) (engine.Chunk, error) {
		return engine.Chunk{}, &engine.InputError{Reason: fmt.Sprintf(h.Kind+" chunk: "+format, args...)}
	}
	switch engine.Kind(h.Kind) {
	case "":
		return engine.Chunk{}, &engine.InputError{Reason: "a chunk has no kind"}
	case engine.KindText:
		if !utf8.Valid(data) {
			return bad("the text is not UTF-8")
		}
		return engine.Chunk{Text: &engine.Text{Text: string(data)}}, nil
	case engine.KindAudio:
		if h.SampleRate <= 0 {
			return bad("sample_rate %d is not a positive number of Hz", h.SampleRate)
		}
		if len(data)%2 != 0 {
			return bad("%d bytes of 16-bit samples is not an even number", len(data))
		}
		samples := make([]int16, len(data)/2)
		for i := range samples {
			samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
		}
		return engine.Chunk{Audio: &engine.Audio{SampleRate: h.SampleRate, Samples: samples, EndOfSentence: h.EndOfSentence}}, nil
	case engine.KindTimestamps:
		return engine.Chunk{Words: &engine.Words{Words: h.Words}}, nil
	case engine.KindFrames:
		return decodeFrames(h, data, bad)
	case engine.KindSegments:
		n := len(h.Names)
		if len(h.Ends) != n || len(h.Cluster) != n || len(h.TargetPos) != len(h.TargetF0) {
			return bad("names, ends and cluster (and target_pos and target_f0) must have one entry each")
		}
		return engine.Chunk{Segments: &engine.Segments{Voice: h.Voice, Names: h.Names, Ends: h.Ends, Cluster: h.Cluster, TargetPos: h.TargetPos, TargetF0: h.TargetF0}}, nil
	}
	if err := engine.CheckMeta(h.Meta); err != nil {
		return bad("%v", err)
	}
	return engine.Chunk{Data: &engine.Data{Kind: engine.Kind(h.Kind), Bytes: data, Meta: h.Meta}}, nil
}

func decodeFrames(h *ChunkHeader, data []byte, bad func(string, ...any) (engine.Chunk, error)) (engine.Chunk, error) {
	row := h.Channels + h.StrChannels
	if h.Channels <= 0 || h.StrChannels < 0 {
		return bad("channels %d and str_channels %d", h.Channels, h.StrChannels)
	}
	if len(data)%(4*row) != 0 {
		return bad("%d bytes is not a whole number of %d-float frames", len(data), row)
	}
	n := len(data) / (4 * row)
	f := &engine.Frames{Voice: h.Voice, Channels: h.Channels, StrChannels: h.StrChannels, FrameShift: h.FrameShift,
		Params: readFloats(data[:4*n*h.Channels]), Str: readFloats(data[4*n*h.Channels:])}
	return engine.Chunk{Frames: f}, nil
}

func appendFloats(b []byte, fs []float32) []byte {
	for _, f := range fs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func readFloats(b []byte) []float32 {
	fs := make([]float32, len(b)/4)
	for i := range fs {
		fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return fs
}
