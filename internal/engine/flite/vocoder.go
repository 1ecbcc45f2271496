package flite

// The flite-vocoder engine: frames or segments to audio, in blocks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
)

// Vocoder is the flite-vocoder engine: frames (mlsa_resynthesis) or
// segments (diphone_synth) in, audio out.
//
// Output chunks are blocks of at most MaxBlockMs of samples, never empty,
// sent as they are synthesized, sentence after sentence; no block spans
// two input chunks. Concatenated, a sentence's blocks are exactly the
// samples one call synthesizing the whole sentence gives with the same
// seed. For clustergen voices the blocks come from inside the synthesis,
// each the most whole frames that fit in MaxBlockMs (1600 samples at
// 16 kHz) but a sentence's last, which may be shorter, so the time to the
// first audio does not grow with the sentence. The diphone synthesis
// cannot stream: it vocodes the whole sentence first (about 1 ms per
// second of speech), then sends it in blocks of MaxBlockMs, the last one
// shorter.
//
// The synthesis never waits for the consumer: it queues the sentence's
// blocks (at most MaxChunkSeconds of audio) for a goroutine that sends
// them on, and Process reads the next input chunk once they are all sent.
// When ctx ends or a send fails, a clustergen synthesis stops at its next
// block, and Process returns the error once the sending goroutine is done.
//
// Each sentence's synthesis runs in a turn on the CPU (engine.Turn); a
// clustergen synthesis yields it after each block, so that a request due
// first (one that has not spoken yet) waits a block, not a sentence.
//
// The excitation noise comes from rand(), which the synthesis seeds with
// the request's seed right before it starts, so a given seed always yields
// the same samples. rand() and srand() are this package's own (crand.c),
// with one sequence per thread instead of libc's one for the whole
// process: concurrent syntheses, on as many cores, each draw exactly what
// a lone run draws.
type Vocoder struct {
	input engine.Kind
}

var (
	_ engine.Engine        = (*Vocoder)(nil)
	_ engine.ParamsChecker = (*Vocoder)(nil)
)

// VocoderParams are the vocoder's per-request sampling params.
type VocoderParams struct {
	// Seed seeds the excitation noise, srand(seed) before each sentence. It
	// must fit in 32 bits unsigned; absent means DefaultSeed, so output is
	// deterministic by default.
	Seed *int64 `json:"seed,omitempty"`
}

// DefaultSeed is the seed used when a request names none.
const DefaultSeed = 1

// MaxBlockMs bounds the audio of one output chunk, in milliseconds.
const MaxBlockMs = 100

// blockSamples is the size of an audio block at rate: the most whole steps
// (a clustergen frame's samples, or 1) in MaxBlockMs, and at least one step.
func blockSamples(rate, step int) int {
	return max(1, rate*MaxBlockMs/1000/step) * step
}

// Limits on one chunk of frames or segments. A sentence of 500 ordinary
// words (flite's longest utterance) at speed 0.25 lasts about 10 minutes.
const (
	// MaxChunkSeconds bounds the speech one chunk may describe: 180000
	// frames, about 22 MB of float32 frames or 29 MB of audio.
	MaxChunkSeconds = 900
	// MaxSegments bounds a segments chunk's segments and pitch targets.
	MaxSegments = 50000
)

func checkVocoder(spec engine.Spec) error {
	v, err := decodeOptions(spec.Options)
	if err != nil {
		return err
	}
	if spec.Input != engine.KindFrames && spec.Input != engine.KindSegments {
		return fmt.Errorf("vocoder input must be %q or %q, not %q", engine.KindFrames, engine.KindSegments, spec.Input)
	}
	if spec.Output != engine.KindAudio {
		return fmt.Errorf("vocoder output must be %q, not %q", engine.KindAudio, spec.Output)
	}
	if _, set := spec.Options["voice"]; set && spec.Input != v.kind {
		return fmt.Errorf("voice %q is vocoded from %q, but the stage declares input %q", v.name, v.kind, spec.Input)
	}
	return nil
}

func newVocoder(spec engine.Spec) (engine.Engine, error) {
	if err := checkVocoder(spec); err != nil {
		return nil, err
	}
	if err := initFlite(); err != nil {
		return nil, err
	}
	return &Vocoder{input: spec.Input}, nil
}

func vocoderSeed(raw json.RawMessage) (uint32, error) {
	var p VocoderParams
	if err := engine.DecodeParams(raw, &p); err != nil {
		return 0, err
	}
	if p.Seed == nil {
		return DefaultSeed, nil
	}
	if *p.Seed < 0 || *p.Seed > math.MaxUint32 {
		return 0, &engine.ParamError{Field: "seed", Reason: fmt.Sprintf("%d is out of range 0..%d", *p.Seed, uint32(math.MaxUint32))}
	}
	return uint32(*p.Seed), nil
}

// CheckParams implements engine.ParamsChecker.
func (v *Vocoder) CheckParams(params json.RawMessage) error {
	_, err := vocoderSeed(params)
	return err
}

// Warm vocodes a short sentence with every voice of the stage's input kind.
func (v *Vocoder) Warm(ctx context.Context) error {
	for _, vc := range voices {
		if vc.kind != v.input {
			continue
		}
		c, err := (&Talker{voice: vc}).sentence(request{voice: vc}, "Hello.")
		if err != nil {
			return fmt.Errorf("flite-vocoder: warm %s: %w", vc.name, err)
		}
		if err := v.chunk(ctx, c, DefaultSeed, discard{}); err != nil {
			return fmt.Errorf("flite-vocoder: warm %s: %w", vc.name, err)
		}
	}
	return nil
}

// Close implements engine.Engine.
func (v *Vocoder) Close() error { return nil }

// discard is a Sink that drops what it is sent.
type discard struct{}

func (discard) Send(context.Context, engine.Chunk) error { return nil }

// Process vocodes each input chunk as it arrives and sends its audio in
// blocks as they are synthesized, all of them before it reads the next
// input chunk.
func (v *Vocoder) Process(ctx context.Context, job *engine.Job) error {
	seed, err := vocoderSeed(job.Params)
	if err != nil {
		return fmt.Errorf("flite-vocoder: %w", err)
	}
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := v.chunk(ctx, c, seed, job.Out); err != nil {
			return fmt.Errorf("flite-vocoder: %w", err)
		}
	}
}

// chunk validates one input chunk (a sentence), vocodes it and sends its
// audio to out in blocks, then the sentence's end mark.
func (v *Vocoder) chunk(ctx context.Context, c engine.Chunk, seed uint32, out engine.Sink) error {
	rs := &rateSink{Sink: out, span: c.Span}
	if err := v.blocks(ctx, c, seed, rs); err != nil {
		return err
	}
	if rs.rate == 0 {
		return nil
	}
	return out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: rs.rate, EndOfSentence: true}})
}

// rateSink notes the sample rate of the audio sent through it, and puts
// the sentence's span on its first block.
type rateSink struct {
	engine.Sink
	rate int
	span *engine.Span
}

func (s *rateSink) Send(ctx context.Context, c engine.Chunk) error {
	if c.Audio != nil {
		s.rate = c.Audio.SampleRate
		c.Span, s.span = s.span, nil
	}
	return s.Sink.Send(ctx, c)
}

// blocks validates one input chunk, vocodes it and sends its audio to out.
func (v *Vocoder) blocks(ctx context.Context, c engine.Chunk, seed uint32, out engine.Sink) error {
	if k := c.Kind(); k != v.input {
		return &engine.InputError{Reason: fmt.Sprintf("vocoder input must be %s, got %q", v.input, k)}
	}
	if c.Frames != nil {
		vc, err := validateFrames(c.Frames)
		if err != nil {
			return err
		}
		return streamFrames(ctx, vc, c.Frames, seed, out)
	}
	vc, err := validateSegments(c.Segments)
	if err != nil {
		return err
	}
	turn, err := engine.Turn(ctx)
	if err != nil {
		return err
	}
	a, err := vocodeSegments(vc, c.Segments, seed)
	turn.End()
	if err != nil {
		return err
	}
	n := blockSamples(a.SampleRate, 1)
	for i := 0; i < len(a.Samples); i += n {
		end := min(i+n, len(a.Samples))
		// Capped, so that appending to one block cannot write into the next.
		b := &engine.Audio{SampleRate: a.SampleRate, Samples: a.Samples[i:end:end]}
		if err := out.Send(ctx, engine.Chunk{Audio: b}); err != nil {
			return err
		}
	}
	return nil
}

// blockStream carries one sentence's audio blocks from a clustergen
// synthesis to the goroutine that sends them. put never blocks, so that
// the synthesis never waits for the consumer: blocks has room for every
// block of the sentence.
type blockStream struct {
	// ctx ends when the request does or sending fails; the synthesis then
	// stops at its next block.
	ctx      context.Context
	blocks   chan *engine.Audio
	overflow bool // set by put, read once the synthesis has returned
	// turn is the synthesis's turn on the CPU (engine.Turn), which it
	// yields after each block to a request due first; nil: none.
	turn engine.CPUTurn
}

// live reports whether the synthesis should go on.
func (s *blockStream) live() bool { return s.ctx.Err() == nil }

// next is called after each block: it lets a request due first have the
// CPU, and reports whether the synthesis should go on (false when ctx
// ended meanwhile).
func (s *blockStream) next() bool { return s.turn == nil || s.turn.Yield(s.ctx) == nil }

// put queues a non-empty block. It never blocks: false means the queue was
// full, which the capacity rules out.
func (s *blockStream) put(a *engine.Audio) bool {
	if len(a.Samples) == 0 { // flite's last call may find nothing left
		return true
	}
	select {
	case s.blocks <- a:
		return true
	default:
		s.overflow = true
		return false
	}
}

// streamFrames vocodes validated frames on the calling goroutine, in a
// turn on the CPU that it yields at each block, while another goroutine
// sends each block to out as soon as flite hands it over. It returns once
// both are done.
func streamFrames(ctx context.Context, v *voice, f *engine.Frames, seed uint32, out engine.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	turn, err := engine.Turn(ctx)
	if err != nil {
		return err
	}
	defer turn.End()
	// Frames make at most frameSamples each: that many full blocks at most,
	// plus the rest.
	n := f.Len()*v.frameSamples/v.blockSamples + 1
	s := &blockStream{ctx: ctx, blocks: make(chan *engine.Audio, n), turn: turn}
	sent := make(chan error, 1)
	go func() {
		for a := range s.blocks {
			if err := out.Send(ctx, engine.Chunk{Audio: a}); err != nil {
				cancel()
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	_, err = vocodeFrames(v, f, seed, s)
	turn.End()
	close(s.blocks)
	if err := <-sent; err != nil {
		return err
	}
	switch {
	case errors.Is(err, errStopped) && s.overflow:
		return fmt.Errorf("more than %d blocks from %d frames", n, f.Len())
	case errors.Is(err, errStopped):
		return ctx.Err()
	}
	return err
}

// Frame value bounds: F0 is 0 (unvoiced) or a pitch, the mel-cepstra stay
// far inside ±maxCepstrum (flite's own stay within ±10), and the excitation
// strengths near [0, 1]. A negative F0 would make the pulse train NaN.
const (
	minF0       = 10
	maxF0       = 2000
	maxCepstrum = 50
	minStr      = -1
	maxStr      = 2
)

func frameErr(format string, args ...any) error {
	return &engine.InputError{Reason: "frames: " + fmt.Sprintf(format, args...)}
}

// validateFrames checks frames against the voice they name before they reach C.
func validateFrames(f *engine.Frames) (*voice, error) {
	vc, err := lookupVoice(f.Voice)
	if err != nil {
		return nil, frameErr("unknown voice %q", f.Voice)
	}
	if vc.kind != engine.KindFrames {
		return nil, frameErr("voice %q makes %s, not frames", vc.name, vc.kind)
	}
	if f.Channels != vc.channels || f.StrChannels != vc.strChans {
		return nil, frameErr("voice %q has %d+%d channels per frame, got %d+%d", vc.name, vc.channels, vc.strChans, f.Channels, f.StrChannels)
	}
	if f.FrameShift != vc.frameShift {
		return nil, frameErr("voice %q has a frame shift of %gs, got %gs", vc.name, vc.frameShift, f.FrameShift)
	}
	n := f.Len()
	if n == 0 {
		return nil, frameErr("no frames")
	}
	if len(f.Params) != n*f.Channels {
		return nil, frameErr("%d params is not a multiple of %d channels", len(f.Params), f.Channels)
	}
	if len(f.Str) != n*f.StrChannels {
		return nil, frameErr("%d frames of params but %d excitation values (want %d)", n, len(f.Str), n*f.StrChannels)
	}
	if float64(n)*float64(f.FrameShift) > MaxChunkSeconds {
		return nil, frameErr("%d frames is more than %d s", n, MaxChunkSeconds)
	}
	for i, x := range f.Params {
		ch := i % f.Channels
		bad := math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)
		if ch == 0 {
			bad = bad || x != 0 && (x < minF0 || x > maxF0)
		} else {
			bad = bad || x < -maxCepstrum || x > maxCepstrum
		}
		if bad {
			return nil, frameErr("frame %d channel %d: value %g out of range", i/f.Channels, ch, x)
		}
	}
	for i, x := range f.Str {
		if math.IsNaN(float64(x)) || x < minStr || x > maxStr {
			return nil, frameErr("frame %d excitation %d: value %g out of range", i/f.StrChannels, i%f.StrChannels, x)
		}
	}
	return vc, nil
}

// Pitch target bounds for diphone segments.
const (
	minTargetF0 = 20
	maxTargetF0 = 1000
)

func segErr(format string, args ...any) error {
	return &engine.InputError{Reason: "segments: " + fmt.Sprintf(format, args...)}
}

// validateSegments checks segments against the voice they name before they
// reach C: diphone_synth loops on the pitch targets, so they must be
// finite, ordered and positive.
func validateSegments(s *engine.Segments) (*voice, error) {
	vc, err := lookupVoice(s.Voice)
	if err != nil {
		return nil, segErr("unknown voice %q", s.Voice)
	}
	if vc.kind != engine.KindSegments {
		return nil, segErr("voice %q makes %s, not segments", vc.name, vc.kind)
	}
	n := len(s.Names)
	if n < 2 {
		return nil, segErr("need at least 2 segments, got %d", n)
	}
	if n > MaxSegments || len(s.TargetPos) > MaxSegments {
		return nil, segErr("more than %d segments or targets", MaxSegments)
	}
	if len(s.Ends) != n || len(s.Cluster) != n {
		return nil, segErr("%d names, %d ends and %d cluster bits differ", n, len(s.Ends), len(s.Cluster))
	}
	if len(s.TargetPos) == 0 || len(s.TargetPos) != len(s.TargetF0) {
		return nil, segErr("need as many target positions as target F0 values (at least one), got %d and %d", len(s.TargetPos), len(s.TargetF0))
	}
	for i, name := range s.Names {
		if !vc.phones[name] {
			return nil, segErr("segment %d: %q is not a phone of voice %q", i, name, vc.name)
		}
	}
	if err := checkTimes("segment end", s.Ends); err != nil {
		return nil, err
	}
	if err := checkTimes("target position", s.TargetPos); err != nil {
		return nil, err
	}
	if s.TargetPos[len(s.TargetPos)-1] <= 0 {
		return nil, segErr("the last target position must be after 0")
	}
	for i, f0 := range s.TargetF0 {
		if !(f0 >= minTargetF0 && f0 <= maxTargetF0) {
			return nil, segErr("target %d: F0 %g is outside [%d, %d] Hz", i, f0, minTargetF0, maxTargetF0)
		}
	}
	return vc, nil
}

// checkTimes requires finite, non-negative, non-decreasing times below
// MaxChunkSeconds.
func checkTimes(what string, ts []float32) error {
	prev := float32(0)
	for i, t := range ts {
		if !(t >= prev && t <= MaxChunkSeconds) {
			return segErr("%s %d: %g is not in [%g, %d] (times must not decrease)", what, i, t, prev, MaxChunkSeconds)
		}
		prev = t
	}
	return nil
}
