package engine

// The data that flows between stages: kinds, chunks, and the Sources and
// Sinks that carry them.

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Kind names a type of data that flows between stages.
type Kind string

// The kinds a pipeline may declare.
const (
	KindText       Kind = "text"
	KindFrames     Kind = "frames"
	KindSegments   Kind = "segments"
	KindAudio      Kind = "audio"
	KindTimestamps Kind = "timestamps"
	KindTensor     Kind = "tensor"
	KindImage      Kind = "image"
	KindRegions    Kind = "regions"
)

// Kinds lists the built-in kinds. A pipeline may declare kinds of its own
// (pipeline.kinds), whose chunks are Data.
var Kinds = []Kind{KindText, KindFrames, KindSegments, KindAudio, KindTimestamps, KindTensor, KindImage, KindRegions}

// KindNameOK reports whether name may name a kind a pipeline declares:
// lower-case letters, digits, '.', '_' or '-', starting with a letter.
func KindNameOK(name string) bool {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Valid reports whether k is one of the built-in Kinds.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// Chunk is one piece of a stage's stream. Exactly one field is set; its kind
// is Kind().
type Chunk struct {
	Text     *Text
	Frames   *Frames
	Segments *Segments
	Audio    *Audio
	Words    *Words
	Tensors  *Tensors
	Image    *Image
	Regions  *Regions
	// Data is a chunk of a kind the pipeline declares.
	Data *Data
	// Span, when set, is the sentence of the request's text the chunk
	// begins to speak: the talker sets it on each sentence's chunk and a
	// vocoder carries it onto the sentence's first audio block.
	Span *Span
}

// Span is one sentence of a request's text: its index among the sentences
// spoken (from 0), its code points [Start, End) in the request's text (for
// a streamed request, the text received so far), and Text, those code
// points themselves, so that a stage after the talker (the aligner, on
// another server too) has the sentence's words with the audio that
// speaks them.
type Span struct {
	Sentence   int
	Start, End int
	Text       string
}

// Kind returns the kind of the field that is set, or "" for an empty chunk.
func (c Chunk) Kind() Kind {
	switch {
	case c.Text != nil:
		return KindText
	case c.Frames != nil:
		return KindFrames
	case c.Segments != nil:
		return KindSegments
	case c.Audio != nil:
		return KindAudio
	case c.Words != nil:
		return KindTimestamps
	case c.Tensors != nil:
		return KindTensor
	case c.Image != nil:
		return KindImage
	case c.Regions != nil:
		return KindRegions
	case c.Data != nil:
		return c.Data.Kind
	}
	return ""
}

// Text is a piece of text. Break, on a piece of a streamed request's
// text (possibly empty), says that the text so far ends a sentence,
// whatever comes next: a live session's client fell quiet after a full
// stop, which alone does not end a sentence for a talker (it waits for
// the next word to tell "Dr. Smith" from a sentence's end).
type Text struct {
	Text  string
	Break bool
}

// Frames are clustergen acoustic frames for one sentence: per 5 ms frame a
// row of Channels parameters (F0 and mel-cepstra) and a row of StrChannels
// excitation strengths, both row-major.
type Frames struct {
	Voice       string
	Channels    int
	Params      []float32
	StrChannels int
	Str         []float32
	// FrameShift is the frame period in seconds.
	FrameShift float32
}

// Len returns the number of frames.
func (f *Frames) Len() int {
	if f.Channels == 0 {
		return 0
	}
	return len(f.Params) / f.Channels
}

// Segments are a diphone voice's segments and pitch targets for one sentence.
type Segments struct {
	Voice string
	// Names, Ends (seconds) and Cluster (a consonant-cluster bit) describe
	// each segment, in order.
	Names   []string
	Ends    []float32
	Cluster []bool
	// TargetPos (seconds) and TargetF0 (Hz) are the pitch targets.
	TargetPos []float32
	TargetF0  []float32
}

// Audio is 16-bit mono PCM. A chunk with EndOfSentence set, and no
// samples, marks the end of a sentence's audio: a vocoder sends one after
// each sentence, and an aligner aligns each sentence as its mark arrives.
type Audio struct {
	SampleRate    int
	Samples       []int16
	EndOfSentence bool
}

// Data is a chunk of a kind the pipeline declares (its kinds section):
// bytes and a small metadata map, which the runtime carries from stage to
// stage unchanged and never reads.
type Data struct {
	Kind  Kind
	Bytes []byte
	Meta  map[string]string
}

// Limits of a Data chunk's metadata, wherever it travels.
const (
	MaxMetaEntries = 64
	MaxMetaBytes   = 4096 // keys and values together
)

// CheckMeta refuses metadata past the limits.
func CheckMeta(meta map[string]string) error {
	if len(meta) > MaxMetaEntries {
		return fmt.Errorf("%d metadata entries; the limit is %d", len(meta), MaxMetaEntries)
	}
	n := 0
	for k, v := range meta {
		n += len(k) + len(v)
	}
	if n > MaxMetaBytes {
		return fmt.Errorf("%d bytes of metadata; the limit is %d", n, MaxMetaBytes)
	}
	return nil
}

// Words are word timestamps.
type Words struct {
	Words []Word
}

// Word is one word's place in the audio. An aligner's entries are the
// tokens of the request's input text: Word is the input's own text of the
// span [CharStart, CharEnd) (offsets in Unicode code points, end
// exclusive), and Spoken the words the talker said for it ("$100": "one",
// "hundred", "dollars"). Entries without a span (a talker's own word
// times) have Spoken nil and the span zero.
type Word struct {
	Word      string   `json:"word"`
	CharStart int      `json:"char_start"`
	CharEnd   int      `json:"char_end"`
	StartMs   int      `json:"start_ms"`
	EndMs     int      `json:"end_ms"`
	Spoken    []string `json:"spoken,omitempty"`
}

// SliceSource is a Source over a fixed list of chunks.
type SliceSource struct {
	chunks []Chunk
}

// NewSliceSource returns a Source that yields chunks in order.
func NewSliceSource(chunks ...Chunk) *SliceSource { return &SliceSource{chunks: chunks} }

// Reset makes s yield chunks in order, from the first.
func (s *SliceSource) Reset(chunks ...Chunk) { s.chunks = chunks }

// Recv implements Source.
func (s *SliceSource) Recv(ctx context.Context) (Chunk, error) {
	if err := ctx.Err(); err != nil {
		return Chunk{}, err
	}
	if len(s.chunks) == 0 {
		return Chunk{}, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

// ChanSource is a Source over a channel: it yields the chunks sent on it
// until it is closed (then io.EOF).
type ChanSource <-chan Chunk

// Recv implements Source.
func (s ChanSource) Recv(ctx context.Context) (Chunk, error) {
	select {
	case c, ok := <-s:
		if !ok {
			return Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return Chunk{}, ctx.Err()
	}
}

// SliceSink is a Sink that appends to Chunks.
type SliceSink struct {
	Chunks []Chunk
}

// Send implements Sink.
func (s *SliceSink) Send(ctx context.Context, c Chunk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.Chunks = append(s.Chunks, c)
	return nil
}

// RecvAll reads src to its end.
func RecvAll(ctx context.Context, src Source) ([]Chunk, error) {
	var out []Chunk
	for {
		c, err := src.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

// JoinAudio concatenates the audio chunks among cs (other kinds are
// skipped). It returns nil when there are none, and an error when the
// chunks disagree on the sample rate.
func JoinAudio(cs []Chunk) (*Audio, error) {
	var a *Audio
	n := 0
	for _, c := range cs {
		if c.Audio != nil {
			n += len(c.Audio.Samples)
		}
	}
	for _, c := range cs {
		if c.Audio == nil {
			continue
		}
		if a == nil {
			a = &Audio{SampleRate: c.Audio.SampleRate, Samples: make([]int16, 0, n)}
		} else if c.Audio.SampleRate != a.SampleRate {
			return nil, fmt.Errorf("audio chunks change sample rate from %d to %d Hz", a.SampleRate, c.Audio.SampleRate)
		}
		a.Samples = append(a.Samples, c.Audio.Samples...)
	}
	return a, nil
}

// JoinWords concatenates the word timestamps among cs.
func JoinWords(cs []Chunk) []Word {
	var words []Word
	for _, c := range cs {
		if c.Words != nil {
			words = append(words, c.Words.Words...)
		}
	}
	return words
}
