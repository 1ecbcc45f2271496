// Package enhance is the audio-enhance engine: it resamples a stage's audio
// to the rate clients expect and normalizes its loudness, chunk by chunk as
// the audio streams through.
//
// # Deploy options
//
//	sample_rate: 24000   output rate in Hz, one of Rates (OpenAI clients expect 24 kHz)
//	normalize: true      normalize loudness
//	target_dbfs: -20     loudness target, gated RMS in dBFS (see audio.Loudness)
//	peak_dbfs: -1        peak limit in dBFS, above the target
//
// # Per-request params
//
//	{"sample_rate": 16000, "normalize": false}   both optional
//
// # Streaming
//
// Each input chunk is resampled as it arrives, by one audio.Resampler per
// request that keeps its filter state from chunk to chunk, and sent on as one
// output chunk; at the end of the input the resampler's last few
// milliseconds go out as a final chunk. The output is sample for sample what
// resampling the whole input at once gives, and keeps its timing.
//
// Normalizing each chunk to the target on its own would change the gain
// from chunk to chunk, so that one sentence came out louder than the next.
// Instead the gain is set once per request, from the first chunk loud enough
// to be speech (-50 dBFS or louder; the vocoder sends a sentence per chunk),
// and kept for the rest of the request; every chunk goes through the peak
// limiter, which lowers the gain only around peaks that would exceed
// peak_dbfs. Chunks before the gain is set (leading silence) pass at unity
// gain. Later sentences keep their level relative to the first, as the
// talker made them. A request that must not be touched sets normalize to
// false.
package enhance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// Name is the engine's name in pipeline configs.
const Name = "audio-enhance"

// Defaults of the deploy options.
const (
	DefaultSampleRate = 24000
	DefaultTargetDBFS = -20.0
	DefaultPeakDBFS   = -1.0
)

// speechDBFS is the loudness a chunk must reach for its gain to be kept for
// the request: quieter chunks (silence, breath, noise) would set a gain that
// blows the following speech up into the limiter.
const speechDBFS = -50.0

// Rates lists the output rates the engine offers, the usual audio rates.
// Between any two of them the reduced resampling ratio stays small.
var Rates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

// Options are the engine's deploy options; unset fields take the defaults.
type Options struct {
	SampleRate int      `json:"sample_rate"`
	Normalize  *bool    `json:"normalize"`
	TargetDBFS *float64 `json:"target_dbfs"`
	PeakDBFS   *float64 `json:"peak_dbfs"`
}

// Params are the engine's per-request params; unset fields keep the
// replica's options.
type Params struct {
	SampleRate int   `json:"sample_rate"`
	Normalize  *bool `json:"normalize"`
}

// config is what one request runs with.
type config struct {
	rate       int
	normalize  bool
	targetDBFS float64
	peakDBFS   float64
}

// Enhancer is one replica of the audio-enhance engine. It holds no
// per-request state, so Process may run concurrently.
type Enhancer struct {
	cfg config
}

var (
	_ engine.Engine        = (*Enhancer)(nil)
	_ engine.ParamsChecker = (*Enhancer)(nil)
)

// Register adds the audio-enhance driver to r. Check refuses a stage that
// does not read and write audio, and bad options.
func Register(r *engine.Registry) {
	r.Register(Name, engine.Driver{
		Check: func(spec engine.Spec) error {
			_, err := newEnhancer(spec)
			return err
		},
		New: func(spec engine.Spec) (engine.Engine, error) {
			return newEnhancer(spec)
		},
	})
}

func newEnhancer(spec engine.Spec) (*Enhancer, error) {
	if spec.Input != engine.KindAudio {
		return nil, fmt.Errorf("%s: input must be %q, not %q", Name, engine.KindAudio, spec.Input)
	}
	if spec.Output != engine.KindAudio {
		return nil, fmt.Errorf("%s: output must be %q, not %q", Name, engine.KindAudio, spec.Output)
	}
	cfg, err := decodeOptions(spec.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: options: %w", Name, err)
	}
	return &Enhancer{cfg: cfg}, nil
}

func decodeOptions(o engine.Options) (config, error) {
	var opts Options
	if err := o.Decode(&opts); err != nil {
		return config{}, err
	}
	cfg := config{rate: DefaultSampleRate, normalize: true, targetDBFS: DefaultTargetDBFS, peakDBFS: DefaultPeakDBFS}
	if opts.SampleRate != 0 {
		cfg.rate = opts.SampleRate
	}
	if opts.Normalize != nil {
		cfg.normalize = *opts.Normalize
	}
	if opts.TargetDBFS != nil {
		cfg.targetDBFS = *opts.TargetDBFS
	}
	if opts.PeakDBFS != nil {
		cfg.peakDBFS = *opts.PeakDBFS
	}
	var errs []error
	if err := checkRate(cfg.rate); err != nil {
		errs = append(errs, fmt.Errorf("sample_rate: %w", err))
	}
	if cfg.targetDBFS < -70 || cfg.targetDBFS > 0 {
		errs = append(errs, fmt.Errorf("target_dbfs: %g is outside [-70, 0]", cfg.targetDBFS))
	}
	if cfg.peakDBFS < -30 || cfg.peakDBFS > 0 {
		errs = append(errs, fmt.Errorf("peak_dbfs: %g is outside [-30, 0]", cfg.peakDBFS))
	}
	if len(errs) == 0 && cfg.targetDBFS >= cfg.peakDBFS {
		errs = append(errs, fmt.Errorf("target_dbfs: %g must be below peak_dbfs %g", cfg.targetDBFS, cfg.peakDBFS))
	}
	return cfg, errors.Join(errs...)
}

func checkRate(rate int) error {
	if !slices.Contains(Rates, rate) {
		return fmt.Errorf("%d Hz is not offered (want one of %v)", rate, Rates)
	}
	return nil
}

// Warm implements engine.Engine. It builds the filter bank for the
// vocoder's 16 kHz, so that the first request does not pay for it.
func (e *Enhancer) Warm(ctx context.Context) error {
	_, err := audio.NewResampler(16000, e.cfg.rate)
	return err
}

// Close implements engine.Engine.
func (e *Enhancer) Close() error { return nil }

// CheckParams implements engine.ParamsChecker.
func (e *Enhancer) CheckParams(raw json.RawMessage) error {
	_, err := e.request(raw)
	return err
}

// request returns the config for one request's params.
func (e *Enhancer) request(raw json.RawMessage) (config, error) {
	var p Params
	if err := engine.DecodeParams(raw, &p); err != nil {
		return config{}, err
	}
	cfg := e.cfg
	if p.SampleRate != 0 {
		if err := checkRate(p.SampleRate); err != nil {
			return config{}, &engine.ParamError{Field: "sample_rate", Reason: err.Error()}
		}
		cfg.rate = p.SampleRate
	}
	if p.Normalize != nil {
		cfg.normalize = *p.Normalize
	}
	return cfg, nil
}

// Process implements engine.Engine: one output chunk per input chunk, plus
// the resampler's tail.
func (e *Enhancer) Process(ctx context.Context, job *engine.Job) error {
	cfg, err := e.request(job.Params)
	if err != nil {
		return err
	}
	s := &stream{cfg: cfg}
	for i := 0; ; i++ {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", Name, err)
		}
		a, err := s.chunk(i, c)
		if err != nil {
			return fmt.Errorf("%s: %w", Name, err)
		}
		if err := job.Out.Send(ctx, engine.Chunk{Audio: a, Span: c.Span}); err != nil {
			return fmt.Errorf("%s: %w", Name, err)
		}
	}
	if tail := s.flush(); tail != nil {
		if err := job.Out.Send(ctx, engine.Chunk{Audio: tail}); err != nil {
			return fmt.Errorf("%s: %w", Name, err)
		}
	}
	return nil
}

// stream is one request's state.
type stream struct {
	cfg    config
	inRate int              // the first chunk's rate; 0 before it
	rs     *audio.Resampler // nil when no resampling is needed
	gainDB float64
	gainOK bool // gainDB is set for the request
}

// chunk processes input chunk i.
func (s *stream) chunk(i int, c engine.Chunk) (*engine.Audio, error) {
	a := c.Audio
	if a == nil {
		kind := string(c.Kind())
		if kind == "" {
			kind = "empty"
		}
		return nil, &engine.InputError{Reason: fmt.Sprintf("chunk %d is %s, want audio", i, kind)}
	}
	if s.inRate == 0 {
		if err := audio.CheckRates(a.SampleRate, s.cfg.rate); err != nil {
			return nil, &engine.InputError{Reason: fmt.Sprintf("chunk %d: %v", i, err)}
		}
		s.inRate = a.SampleRate
		if s.inRate != s.cfg.rate {
			s.rs, _ = audio.NewResampler(s.inRate, s.cfg.rate) // rates checked above
		}
	} else if a.SampleRate != s.inRate {
		return nil, &engine.InputError{Reason: fmt.Sprintf("chunk %d is %d Hz, but the stream started at %d Hz", i, a.SampleRate, s.inRate)}
	}
	samples := a.Samples // ours: a received chunk belongs to the engine
	if s.rs != nil {
		samples = s.rs.Process(samples)
	}
	s.level(samples)
	// A sentence's end mark stays one, for an aligner downstream.
	return &engine.Audio{SampleRate: s.cfg.rate, Samples: samples, EndOfSentence: a.EndOfSentence}, nil
}

// flush returns the resampler's tail, or nil.
func (s *stream) flush() *engine.Audio {
	if s.rs == nil {
		return nil
	}
	samples := s.rs.Flush()
	if len(samples) == 0 {
		return nil
	}
	s.level(samples)
	return &engine.Audio{SampleRate: s.cfg.rate, Samples: samples}
}

// level applies the request's gain and the peak limiter to samples, setting
// the gain from them if they are the first speech.
func (s *stream) level(samples []int16) {
	if !s.cfg.normalize {
		return
	}
	if !s.gainOK {
		if loud, ok := audio.Loudness(samples, s.cfg.rate); ok && loud >= speechDBFS {
			s.gainDB, s.gainOK = s.cfg.targetDBFS-loud, true
		}
	}
	audio.ApplyGain(samples, s.cfg.rate, s.gainDB, s.cfg.peakDBFS)
}
