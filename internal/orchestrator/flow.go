package orchestrator

// Flow: the pipes between a request's stages. A stage's input is its
// producer's bounded channel (chanSource); its output (stageSink) feeds
// the next stage's channel and, when the request selected it, the
// request's output stream, pushing back on the engine while either is
// full, and checking the audio budget.

import (
	"context"
	"io"
	"time"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// chanSource is a stage's input: its producer's bounded channel.
type chanSource struct {
	ch chan engine.Chunk
}

// Recv implements engine.Source.
func (s *chanSource) Recv(ctx context.Context) (engine.Chunk, error) {
	// A chunk that is already there is taken without a select on ctx;
	// like the select, this may hand over a chunk after ctx ended.
	select {
	case c, ok := <-s.ch:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	default:
	}
	select {
	case c, ok := <-s.ch:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// stageSink is a stage's output: the next stage's bounded channel and, when
// the request selected this stage's output, the request's output stream.
type stageSink struct {
	rq       *request
	stage    int
	kind     engine.Kind
	down     chan engine.Chunk
	selected bool
	final    bool
	plays    bool     // its output is the audio the request's listener plays
	bind     *binding // its first output time and span
	audio    audioBudget
}

// Send implements engine.Sink.
func (s *stageSink) Send(ctx context.Context, c engine.Chunk) error {
	if err := ctx.Err(); err != nil {
		s.rq.o.metrics.lateDropped.Inc()
		return err
	}
	// On the monotonic clock since submission (+1, so never 0), as the
	// stage's other times are.
	if b := s.bind; b.first.Load() == 0 && b.first.CompareAndSwap(0, int64(time.Since(s.rq.submitted))+1) {
		b.stageEvent("first_output")
	}
	if err := s.audio.spend(c.Audio, s.bind.job.Prompt); err != nil {
		s.rq.cancel(err)
		return err
	}
	if s.down != nil {
		if err := sendTo(ctx, s.down, c); err != nil {
			s.rq.o.metrics.lateDropped.Inc()
			return err
		}
	}
	if s.plays {
		s.rq.delivered(c.Audio)
	}
	if s.selected {
		out := OutputChunk{Stage: s.stage, Kind: s.kind, Chunk: c, Final: s.final}
		if err := sendTo(ctx, s.rq.out, out); err != nil {
			s.rq.o.metrics.lateDropped.Inc()
			return err
		}
	}
	return nil
}

// sendTo sends v on ch, waiting while ch is full until ctx ends. A free
// place is taken without a select on ctx: the common case costs one
// channel operation.
func sendTo[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	default:
	}
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// audioBudget is deploy.max_audio_seconds for one stage of one request:
// a request may not make more audio than the limit, however short its
// text ("99999 " spoken out loud for an hour), so the work it costs is
// bounded. Sends of one sink do not overlap, so it needs no lock.
type audioBudget struct {
	stage   int
	name    string
	seconds int
	samples int64 // spent so far
}

// secondsPerRune is the most audio one character of a request's text
// explains: many times what speech takes (about 0.07 s a character at a
// usual pace), so that slow voices, numbers spoken out and pauses stay
// within it.
const secondsPerRune = 1

// spend counts a's samples against the budget, and fails once they pass
// it: with a 400 when prompt, the request's text, explains that much
// audio (secondsPerRune) or there is no text to tell (an image's
// request), else with a 500, the stage's fault (a program that floods
// audio for a short text). Chunks that are not audio, and audio without a
// rate, cost nothing.
func (b *audioBudget) spend(a *engine.Audio, prompt engine.Prompt) error {
	if a == nil || a.SampleRate <= 0 {
		return nil
	}
	b.samples += int64(len(a.Samples))
	if b.samples <= int64(b.seconds)*int64(a.SampleRate) {
		return nil
	}
	text, _ := prompt.Current()
	if n := utf8.RuneCountInString(text); n > 0 && n*secondsPerRune < b.seconds {
		return newError(CodeStageFailed, "stage %d (%s) made more than %d s of audio (deploy.max_audio_seconds) for %d characters of text, which explain at most %d s: the stage's fault, not the request's",
			b.stage, b.name, b.seconds, n, n*secondsPerRune)
	}
	return newError(CodeBadRequest, "stage %d's audio passed the limit of %d s for one request (deploy.max_audio_seconds): send less text per request", b.stage, b.seconds)
}
