package stageproto

// Engine chunks to and from the header fields and data of input and
// output messages.

import (
	"fmt"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/lebytes"
)

// EncodeChunk returns the header fields and data of c. The data may share
// c's memory (an audio chunk's samples, on a little-endian host): it is
// for writing, not for keeping. A tensor, image or regions chunk that is
// not valid is refused (engine's Check); a chunk whose data passes
// MaxData is an *engine.InputError (the request's data is too large for a
// stage program; a regions chunk is cut to fit first, by SplitChunk).
func EncodeChunk(c engine.Chunk) (ChunkHeader, []byte, error) {
	h, data, err := encodeChunk(c)
	if err == nil && len(data) > MaxData {
		return ChunkHeader{}, nil, &engine.InputError{Reason: fmt.Sprintf("a %s chunk of %d bytes; a stage program takes at most %d MiB in one", h.Kind, len(data), MaxData>>20)}
	}
	return h, data, err
}

func encodeChunk(c engine.Chunk) (ChunkHeader, []byte, error) {
	switch {
	case c.Text != nil:
		return ChunkHeader{Kind: string(engine.KindText)}, []byte(c.Text.Text), nil
	case c.Audio != nil:
		a := c.Audio
		data, ok := lebytes.ViewInt16Bytes(a.Samples)
		if !ok {
			data = lebytes.AppendInt16s(make([]byte, 0, 2*len(a.Samples)), a.Samples)
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
		data = lebytes.AppendFloat32s(lebytes.AppendFloat32s(data, f.Params), f.Str)
		return ChunkHeader{Kind: string(engine.KindFrames), Voice: f.Voice, Channels: f.Channels, StrChannels: f.StrChannels, FrameShift: f.FrameShift}, data, nil
	case c.Segments != nil:
		s := c.Segments
		return ChunkHeader{Kind: string(engine.KindSegments), Voice: s.Voice, Names: s.Names, Ends: s.Ends, Cluster: s.Cluster, TargetPos: s.TargetPos, TargetF0: s.TargetF0}, nil, nil
	case c.Data != nil:
		return ChunkHeader{Kind: string(c.Data.Kind), Meta: c.Data.Meta}, c.Data.Bytes, nil
	case c.Tensors != nil:
		return encodeTensors(c.Tensors)
	case c.Image != nil:
		return encodeImage(c.Image)
	case c.Regions != nil:
		return encodeRegions(c.Regions)
	}
	return ChunkHeader{}, nil, fmt.Errorf("stage protocol: an empty chunk")
}

// DecodeChunk returns the chunk of an input or output message's header
// fields and data, which it takes: the chunk may share data's memory. A
// kind that is not built in is a Data chunk; whether
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
		return engine.Chunk{Audio: &engine.Audio{SampleRate: h.SampleRate, Samples: int16sOf(data), EndOfSentence: h.EndOfSentence}}, nil
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
	case engine.KindTensor:
		return decodeTensors(h, data, bad)
	case engine.KindImage:
		return decodeImage(h, data, bad)
	case engine.KindRegions:
		return decodeRegions(h, data, bad)
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
		Params: float32sOf(data[:4*n*h.Channels]), Str: float32sOf(data[4*n*h.Channels:])}
	return engine.Chunk{Frames: f}, nil
}

// int16sOf returns the little-endian int16s of b, in b's memory when it
// can; never nil.
func int16sOf(b []byte) []int16 {
	if s, ok := lebytes.ViewInt16s(b); ok && len(s) > 0 {
		return s
	}
	return lebytes.Int16s(b)
}

// float32sOf returns the little-endian float32s of b, in b's memory when
// it can; never nil.
func float32sOf(b []byte) []float32 {
	if s, ok := lebytes.ViewFloat32s(b); ok && len(s) > 0 {
		return s
	}
	return lebytes.Float32s(b)
}
