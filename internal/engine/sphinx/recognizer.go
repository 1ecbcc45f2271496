package sphinx

// Recognizer: free recognition with a language model, an independent
// listener for tests.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
)

// DefaultLM is the n-gram language model of Debian's pocketsphinx-en-us.
const DefaultLM = "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"

// Recognizer is a free-decoding speech recognizer: PocketSphinx with a
// general English language model, told nothing about what the audio says.
// It is not an engine of the runtime; tests use it as an independent
// listener, to check that synthesized speech is intelligible.
//
// A Recognizer holds one decoder (about 100 MB with the default language
// model): concurrent Recognize calls take turns. Use one Recognizer per
// goroutine for parallel decoding.
type Recognizer struct {
	// idle holds the decoder while no call uses it.
	idle chan *decoder
}

// NewRecognizer loads a decoder with the acoustic model in hmm, the
// language model lm and the dictionary dict (empty strings take
// DefaultModel, DefaultLM and DefaultDict) and warms it up on a short
// synthesized sentence, so that its results do not depend on whether a
// call is its first. It takes about a second.
func NewRecognizer(hmm, lm, dict string) (*Recognizer, error) {
	if hmm == "" {
		hmm = DefaultModel
	}
	if lm == "" {
		lm = DefaultLM
	}
	if dict == "" {
		dict = DefaultDict
	}
	d, err := newLMDecoder(hmm, lm, dict)
	if err != nil {
		return nil, fmt.Errorf("recognizer: %w", err)
	}
	r := &Recognizer{idle: make(chan *decoder, 1)}
	r.idle <- d
	speech, _, err := flite.SynthesizeTimed(warmText, flite.DefaultVoice, 0)
	if err == nil {
		_, err = r.Recognize(context.Background(), speech)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("recognizer: warm: %w", err)
	}
	return r, nil
}

// errRecognizerClosed is returned by Recognize after Close.
var errRecognizerClosed = errors.New("recognizer is closed")

// Recognize decodes a as one utterance and returns the words it hears,
// lower-case and separated by single spaces, without silences, fillers or
// alternate-pronunciation suffixes; "" when it hears none. The audio is
// 16-bit mono at 16 to 48 kHz (resampled to 16 kHz) and at most
// MaxAudioSeconds long; other audio is an *engine.InputError.
// Cancellation is noticed while waiting for the decoder; a decode that has
// started runs to its end.
func (r *Recognizer) Recognize(ctx context.Context, a *engine.Audio) (string, error) {
	if a == nil {
		return "", fmt.Errorf("recognizer: %w", &engine.InputError{Reason: "no audio"})
	}
	pcm, _, err := readAudio(ctx, engine.NewSliceSource(engine.Chunk{Audio: a}))
	if err != nil {
		return "", fmt.Errorf("recognizer: %w", err)
	}
	var d *decoder
	select {
	case d = <-r.idle:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if d == nil {
		r.idle <- nil
		return "", fmt.Errorf("recognizer: %w", errRecognizerClosed)
	}
	defer func() { r.idle <- d }()
	if err := d.decode(pcm); err != nil {
		return "", fmt.Errorf("recognizer: %w", err)
	}
	hyp, err := d.hyp()
	if err != nil {
		return "", fmt.Errorf("recognizer: %w", err)
	}
	var words []string
	for _, w := range strings.Fields(hyp) {
		if w = baseWord(w); !isFiller(w) {
			words = append(words, strings.ToLower(w))
		}
	}
	return strings.Join(words, " "), nil
}

// Close waits for a running Recognize call to end and frees the decoder.
// Later calls fail.
func (r *Recognizer) Close() error {
	d := <-r.idle
	if d != nil {
		d.free()
	}
	r.idle <- nil
	return nil
}
