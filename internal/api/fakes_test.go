package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// The fake speech engines: deterministic stand-ins for the flite talker and
// vocoder and the sphinx aligner that produce real kinds (frames, audio,
// words), so that payloads between them pass the codec's checks.
//
//	test-speaker  text -> frames: one frames chunk per word; params voice, speed
//	test-synth    frames -> audio: one audio chunk per frames chunk, 16 kHz
//	test-gain     audio -> audio: halves every sample
//	test-align    audio -> timestamps: the prompt's words spread evenly over the audio
type fakeHooks struct {
	// chunk is called before each output chunk an engine sends (n counts
	// from 0); it may block, and an error fails the call.
	chunk func(ctx context.Context, name string, n int) error
	// warm is called by Warm.
	warm func(name string) error
}

const fakeRate = 16000

type fake struct {
	name  string
	hooks *fakeHooks
	voice string
}

var (
	_ engine.Engine        = (*fake)(nil)
	_ engine.ParamsChecker = (*fake)(nil)
)

func registerFakes(r *engine.Registry, h *fakeHooks) {
	if h == nil {
		h = &fakeHooks{}
	}
	for _, name := range []string{"test-speaker", "test-synth", "test-gain", "test-align"} {
		r.Register(name, engine.Driver{New: func(spec engine.Spec) (engine.Engine, error) {
			var opts struct {
				Voice string `json:"voice"`
			}
			if err := spec.Options.Decode(&opts); err != nil {
				return nil, fmt.Errorf("%s options: %w", name, err)
			}
			if opts.Voice == "" {
				opts.Voice = "slt"
			}
			return &fake{name: name, hooks: h, voice: opts.Voice}, nil
		}})
	}
}

type speakerParams struct {
	Voice string   `json:"voice"`
	Speed *float64 `json:"speed"`
}

func (f *fake) CheckParams(raw json.RawMessage) error {
	if f.name != "test-speaker" {
		var none struct{}
		return engine.DecodeParams(raw, &none)
	}
	var p speakerParams
	if err := engine.DecodeParams(raw, &p); err != nil {
		return err
	}
	switch p.Voice {
	case "", "slt", "rms", "awb":
	default:
		return &engine.ParamError{Field: "voice", Reason: fmt.Sprintf("unknown voice %q", p.Voice)}
	}
	return nil
}

func (f *fake) Warm(ctx context.Context) error {
	if f.hooks.warm != nil {
		return f.hooks.warm(f.name)
	}
	return nil
}

func (f *fake) Close() error { return nil }

func (f *fake) send(ctx context.Context, job *engine.Job, n int, c engine.Chunk) error {
	if f.hooks.chunk != nil {
		if err := f.hooks.chunk(ctx, f.name, n); err != nil {
			return err
		}
	}
	return job.Out.Send(ctx, c)
}

func (f *fake) Process(ctx context.Context, job *engine.Job) error {
	if err := f.CheckParams(job.Params); err != nil {
		return err
	}
	switch f.name {
	case "test-speaker":
		return f.speak(ctx, job)
	case "test-align":
		return f.align(ctx, job)
	}
	for n := 0; ; n++ {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var out engine.Chunk
		switch {
		case f.name == "test-synth" && c.Frames != nil:
			out.Audio = synth(c.Frames)
		case f.name == "test-gain" && c.Audio != nil:
			s := make([]int16, len(c.Audio.Samples))
			for i, v := range c.Audio.Samples {
				s[i] = v / 2
			}
			out.Audio = &engine.Audio{SampleRate: c.Audio.SampleRate, Samples: s}
		default:
			return &engine.InputError{Reason: fmt.Sprintf("%s cannot take %s", f.name, c.Kind())}
		}
		if err := f.send(ctx, job, n, out); err != nil {
			return err
		}
	}
}

func (f *fake) speak(ctx context.Context, job *engine.Job) error {
	var p speakerParams
	_ = engine.DecodeParams(job.Params, &p)
	voice, speed := f.voice, 1.0
	if p.Voice != "" {
		voice = p.Voice
	}
	if p.Speed != nil {
		speed = *p.Speed
	}
	chunks, err := engine.RecvAll(ctx, job.In)
	if err != nil {
		return err
	}
	var text strings.Builder
	for _, c := range chunks {
		if c.Text == nil {
			return &engine.InputError{Reason: "test-speaker takes text"}
		}
		text.WriteString(c.Text.Text)
	}
	for n, w := range strings.Fields(text.String()) {
		params := make([]float32, len(w))
		for i := range len(w) {
			params[i] = float32(w[i])
		}
		fr := &engine.Frames{Voice: voice, Channels: 1, Params: params, FrameShift: float32(0.01 / speed)}
		if err := f.send(ctx, job, n, engine.Chunk{Frames: fr}); err != nil {
			return err
		}
	}
	return nil
}

// synth makes FrameShift seconds of audio per frame, from the frame values
// and the voice.
func synth(fr *engine.Frames) *engine.Audio {
	per := int(float64(fr.FrameShift)*fakeRate + 0.5)
	v := 0
	for _, c := range fr.Voice {
		v = v*31 + int(c)
	}
	s := make([]int16, 0, per*len(fr.Params))
	for _, p := range fr.Params {
		for i := range per {
			s = append(s, int16((int(p)*97+v+i)%20000-10000))
		}
	}
	return &engine.Audio{SampleRate: fakeRate, Samples: s}
}

func (f *fake) align(ctx context.Context, job *engine.Job) error {
	chunks, err := engine.RecvAll(ctx, job.In)
	if err != nil {
		return err
	}
	n, rate := 0, fakeRate
	for _, c := range chunks {
		if c.Audio == nil {
			return &engine.InputError{Reason: "test-align takes audio"}
		}
		n += len(c.Audio.Samples)
		rate = c.Audio.SampleRate
	}
	return f.send(ctx, job, 0, engine.Chunk{Words: &engine.Words{Words: spread(job.Prompt.Text, n*1000/rate)}})
}

// spread places the words of text evenly over ms milliseconds.
func spread(text string, ms int) []engine.Word {
	words := strings.Fields(text)
	out := make([]engine.Word, len(words))
	for i, w := range words {
		out[i] = engine.Word{Word: w, StartMs: ms * i / len(words), EndMs: ms * (i + 1) / len(words)}
	}
	return out
}
