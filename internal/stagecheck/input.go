package stagecheck

// The input of the battery's jobs: a typical one for each kind the check
// can make up, or the user's.

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
)

// Input is the input of a job: chunks of one kind, and the request's text
// (an aligner's transcript).
type Input struct {
	Kind   engine.Kind
	Chunks []engine.Chunk
	Prompt string
	// pieces are the chunks the flow cases send over and over; nil means
	// Chunks.
	pieces []engine.Chunk
	// variants makes the input of the i-th of several jobs at once,
	// different for each i; nil when there is one input only.
	variants func(i int) *Input
}

// The typical inputs' parameters.
const (
	sentence   = "The quick brown fox jumps over the lazy dog."
	toneRate   = 16000
	toneChunks = 10 // of 100 ms: a second
)

// NewInput returns the input the user gives for a stage taking kind: for
// text, data is the text; for audio, a WAV file (16-bit mono PCM), sent in
// chunks of 100 ms and an end-of-sentence mark; for image, a PNG, JPEG or
// WebP file; for a kind a pipeline declares, data is one chunk's bytes.
func NewInput(kind engine.Kind, data []byte) (*Input, error) {
	switch {
	case kind == engine.KindText:
		if !utf8.Valid(data) {
			return nil, errors.New("the input file is not UTF-8 text")
		}
		return &Input{Kind: kind, Chunks: []engine.Chunk{{Text: &engine.Text{Text: string(data)}}}, Prompt: string(data)}, nil
	case kind == engine.KindAudio:
		a, err := audio.ReadWAV(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("the input file: %w", err)
		}
		return &Input{Kind: kind, Chunks: splitAudio(a), Prompt: sentence}, nil
	case kind == engine.KindImage:
		im, err := imaging.Header(data, imaging.DefaultLimits)
		if err != nil {
			return nil, fmt.Errorf("the input file: %w", err)
		}
		return &Input{Kind: kind, Chunks: []engine.Chunk{{Image: &im}}, Prompt: sentence}, nil
	case kind.Valid():
		return nil, fmt.Errorf("an input of kind %s cannot be given in a file: give text, audio (a WAV file), an image or a kind of the pipeline's own", kind)
	case !engine.KindNameOK(string(kind)):
		return nil, fmt.Errorf("%q is not a kind: lower-case letters, digits, '.', '_' or '-', starting with a letter", kind)
	}
	return &Input{Kind: kind, Chunks: []engine.Chunk{{Data: &engine.Data{Kind: kind, Bytes: data}}}, Prompt: sentence}, nil
}

// typicalInput returns the input the check makes up for a stage taking
// kind, or nil and why it cannot.
func typicalInput(kind engine.Kind) (*Input, string) {
	switch kind {
	case engine.KindText:
		return textInput(0), ""
	case engine.KindAudio:
		return toneInput(0), ""
	case engine.KindTimestamps:
		return wordsInput(), ""
	case engine.KindImage:
		return imageInput(0), ""
	case engine.KindTensor, engine.KindRegions:
		return nil, fmt.Sprintf("no typical %s input: a %s stage's input is its pipeline's own; the stage can be checked in its pipeline only", kind, kind)
	case engine.KindFrames, engine.KindSegments:
		return nil, fmt.Sprintf("no typical %s input: %s depend on a talker's voice; the stage can be checked in its pipeline only", kind, kind)
	}
	return nil, fmt.Sprintf("no input for %s, a kind of a pipeline's own: give one with --input-file F --input-kind %s", kind, kind)
}

// textInput is a sentence as one text chunk, different for each i; its
// pieces are its words.
func textInput(i int) *Input {
	text := sentence
	if i > 0 {
		text = fmt.Sprintf("Job %d of the check says%s.", i, strings.Repeat(" hello", i))
	}
	in := &Input{Kind: engine.KindText, Chunks: []engine.Chunk{{Text: &engine.Text{Text: text}}}, Prompt: text, variants: textInput}
	for w := range strings.FieldsSeq(text) {
		in.pieces = append(in.pieces, engine.Chunk{Text: &engine.Text{Text: w + " "}})
	}
	return in
}

// toneInput is a second of a tone at 16 kHz in chunks of 100 ms, then an
// end-of-sentence mark; the tone is higher for each i.
func toneInput(i int) *Input {
	freq := 440.0 + 110*float64(i)
	a := &engine.Audio{SampleRate: toneRate, Samples: make([]int16, toneRate)}
	for k := range a.Samples {
		a.Samples[k] = int16(8000 * math.Sin(2*math.Pi*freq*float64(k)/toneRate))
	}
	return &Input{Kind: engine.KindAudio, Chunks: splitAudio(a), Prompt: sentence, variants: toneInput}
}

// splitAudio cuts a into chunks of 100 ms and an end-of-sentence mark.
func splitAudio(a *engine.Audio) []engine.Chunk {
	step := max(a.SampleRate/10, 1)
	var cs []engine.Chunk
	for s := a.Samples; len(s) > 0; {
		n := min(step, len(s))
		cs = append(cs, engine.Chunk{Audio: &engine.Audio{SampleRate: a.SampleRate, Samples: s[:n]}})
		s = s[n:]
	}
	return append(cs, engine.Chunk{Audio: &engine.Audio{SampleRate: a.SampleRate, EndOfSentence: true}})
}

// wordsInput is the sentence's words, 300 ms each, as one timestamps chunk.
func wordsInput() *Input {
	var words []engine.Word
	pos := 0
	for i, w := range strings.Fields(sentence) {
		start := strings.Index(sentence[pos:], w) + pos
		words = append(words, engine.Word{Word: w, CharStart: start, CharEnd: start + len(w), StartMs: 300 * i, EndMs: 300*i + 280, Spoken: []string{strings.ToLower(strings.Trim(w, "."))}})
		pos = start + len(w)
	}
	return &Input{Kind: engine.KindTimestamps, Chunks: []engine.Chunk{{Words: &engine.Words{Words: words}}}, Prompt: sentence}
}

// imageInput is a PNG file of a black bar on white, 96×32 pixels, the
// bar longer for each i.
func imageInput(i int) *Input {
	m := image.NewGray(image.Rect(0, 0, 96, 32))
	for y := range 32 {
		for x := range 96 {
			v := uint8(255)
			if y >= 12 && y < 20 && x >= 8 && x < 24+8*(i%8) {
				v = 0
			}
			m.SetGray(x, y, color.Gray{Y: v})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		panic(err) // an in-memory image of a fixed size always encodes
	}
	im := &engine.Image{Format: "png", Width: 96, Height: 32, Bytes: b.Bytes()}
	return &Input{Kind: engine.KindImage, Chunks: []engine.Chunk{{Image: im}}, Prompt: sentence, variants: imageInput}
}

// variant returns the input of the i-th of several jobs at once, and
// whether it differs from the others'.
func (in *Input) variant(i int) (*Input, bool) {
	if in.variants == nil {
		return in, false
	}
	return in.variants(i), true
}

// atLeast returns at least n chunks of input: its pieces over and over.
func (in *Input) atLeast(n int) []engine.Chunk {
	pieces := in.pieces
	if pieces == nil {
		pieces = in.Chunks
	}
	var out []engine.Chunk
	for len(out) < n {
		out = append(out, pieces...)
	}
	return out
}

// wrongKind returns a chunk of a kind a stage taking kind does not take.
func wrongKind(kind engine.Kind) engine.Chunk {
	if kind == engine.KindText {
		return engine.Chunk{Audio: &engine.Audio{SampleRate: toneRate, Samples: make([]int16, toneRate/10)}}
	}
	return engine.Chunk{Text: &engine.Text{Text: "This is text, which the stage does not take."}}
}
