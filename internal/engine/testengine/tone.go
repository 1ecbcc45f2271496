package testengine

// Tone: a test talker that turns text into a tone as long as the text.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// ToneRate is the sample rate of the tone engines' audio.
const ToneRate = 16000

// Tone is a test engine that speaks text as a tone, so that what reads
// audio (the speech endpoint, omnistage bench) can be tested without the
// flite engines: each input chunk becomes one 16 kHz audio chunk of a
// 440 Hz tone, one millisecond per byte of the chunk's text (at least one
// millisecond). It is deterministic, returns once its input ends, and
// honours ctx through its source and sink.
type Tone struct {
	Spec engine.Spec
}

var _ engine.Engine = (*Tone)(nil)

// RegisterTone registers a tone engine under each name (each must start
// with "test-"). Tone engines take no options.
func RegisterTone(r *engine.Registry, names ...string) {
	for _, name := range names {
		if !strings.HasPrefix(name, "test-") {
			panic("testengine: name must start with test-: " + name)
		}
		r.Register(name, engine.Driver{
			New: func(spec engine.Spec) (engine.Engine, error) {
				var none struct{}
				if err := spec.Options.Decode(&none); err != nil {
					return nil, fmt.Errorf("%s options: %w", name, err)
				}
				return &Tone{Spec: spec}, nil
			},
		})
	}
}

// ToneSamples returns the number of samples the tone engines make of an
// input chunk carrying text.
func ToneSamples(text string) int { return max(1, len(text)) * ToneRate / 1000 }

// Warm implements engine.Engine.
func (t *Tone) Warm(ctx context.Context) error { return nil }

// Process implements engine.Engine.
func (t *Tone) Process(ctx context.Context, job *engine.Job) error {
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		samples := make([]int16, ToneSamples(textOf(c)))
		for i := range samples {
			samples[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/ToneRate))
		}
		if err := job.Out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: ToneRate, Samples: samples}}); err != nil {
			return err
		}
	}
}

// Close implements engine.Engine.
func (t *Tone) Close() error { return nil }
