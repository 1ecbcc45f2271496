package api

// Fake engines of a live pipeline, for the speech stream's tests: a talker
// that speaks each sentence once the next has begun (as flite's does), a
// vocoder that sends a sentence's audio in blocks with its span on the
// first and its end mark after the last, and an aligner that reads the
// text of a streamed request from its feed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// liveYAML is the fake live pipeline: talker -> vocoder, aligner 2.
const liveYAML = `
pipeline:
  name: live
  input: text
  stages:
    - {id: 0, name: talker,  engine: live-talker, input: text,   output: frames}
    - {id: 1, name: vocoder, engine: live-voc,    input: frames, output: audio, final_output: true}
  aligner: {engine: live-align}
deploy:
  abort_timeout: 2s
`

// liveSamplesPerChar is the audio the fake vocoder makes per character of
// a sentence, and liveBlock its blocks' largest size.
const (
	liveSamplesPerChar = 160 // 10 ms at 16 kHz
	liveBlock          = 800
)

// liveHooks steer the fake live engines.
type liveHooks struct {
	// block is called before the vocoder sends each audio block (n counts
	// them over the request); it may block.
	block func(ctx context.Context, n int) error
	// recv is called before the talker takes more text; it may block.
	recv func(ctx context.Context) error
	// blocks counts the audio blocks sent, over every request.
	blocks atomic.Int64
}

// liveEngines registers the fake live engines, steered by h (nil: none).
func liveEngines(h *liveHooks) func(*engine.Registry) {
	if h == nil {
		h = &liveHooks{}
	}
	return func(r *engine.Registry) {
		for _, name := range []string{"live-talker", "live-voc", "live-align"} {
			r.Register(name, engine.Driver{New: func(engine.Spec) (engine.Engine, error) { return &liveFake{name: name, h: h}, nil }})
		}
	}
}

type liveFake struct {
	name string
	h    *liveHooks
}

func (f *liveFake) Warm(context.Context) error { return nil }
func (f *liveFake) Close() error               { return nil }

func (f *liveFake) Process(ctx context.Context, job *engine.Job) error {
	switch f.name {
	case "live-talker":
		return f.talk(ctx, job)
	case "live-voc":
		return f.vocode(ctx, job)
	}
	return f.align(ctx, job)
}

// liveSentences cuts text into sentences: each ends after '.', '!' or '?'
// and is complete once a character that is not white space follows it
// (or at the end, final). It returns the complete ones, as code point
// spans [start, end) of text from base, and the code points taken.
func liveSentences(text string, base int, final bool) (spans [][2]int, taken int) {
	rs := []rune(text)
	start := 0
	for i := 0; i < len(rs); i++ {
		if !strings.ContainsRune(".!?", rs[i]) {
			continue
		}
		j := i + 1
		for j < len(rs) && (rs[j] == ' ' || rs[j] == '\n') {
			j++
		}
		if j == len(rs) && !final {
			break
		}
		if strings.TrimSpace(string(rs[start:i+1])) != "" {
			lead := len(rs[start:]) - len([]rune(strings.TrimLeft(string(rs[start:]), " \n")))
			spans = append(spans, [2]int{base + start + lead, base + i + 1})
		}
		start, i = j, j-1
		taken = j
	}
	if final && strings.TrimSpace(string(rs[start:])) != "" {
		lead := len(rs[start:]) - len([]rune(strings.TrimLeft(string(rs[start:]), " \n")))
		spans = append(spans, [2]int{base + start + lead, base + len(rs)})
		taken = len(rs)
	}
	return spans, taken
}

// talk sends a frames chunk per sentence as it completes: one frame per
// code point, its value the code point.
func (f *liveFake) talk(ctx context.Context, job *engine.Job) error {
	var pending []rune
	base, sent := 0, 0
	speak := func(final bool) error {
		spans, taken := liveSentences(string(pending), base, final)
		for _, sp := range spans {
			rs := pending[sp[0]-base : sp[1]-base]
			params := make([]float32, len(rs))
			for i, r := range rs {
				params[i] = float32(r)
			}
			c := engine.Chunk{Frames: &engine.Frames{Voice: "slt", Channels: 1, Params: params, FrameShift: 0.01},
				Span: &engine.Span{Sentence: sent, Start: sp[0], End: sp[1]}}
			if err := job.Out.Send(ctx, c); err != nil {
				return err
			}
			sent++
		}
		pending, base = pending[taken:], base+taken
		return nil
	}
	for {
		if f.h.recv != nil {
			if err := f.h.recv(ctx); err != nil {
				return err
			}
		}
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return speak(true)
		}
		if err != nil {
			return err
		}
		if c.Text == nil {
			return &engine.InputError{Reason: "live-talker takes text"}
		}
		pending = append(pending, []rune(c.Text.Text)...)
		if err := speak(false); err != nil {
			return err
		}
	}
}

// vocode sends liveSamplesPerChar samples per frame, in blocks of
// liveBlock, the span on the first, then the sentence's end mark.
func (f *liveFake) vocode(ctx context.Context, job *engine.Job) error {
	n := 0
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.Frames == nil {
			return &engine.InputError{Reason: "live-voc takes frames"}
		}
		samples := liveAudio(c.Frames.Params)
		span := c.Span
		for len(samples) > 0 {
			k := min(liveBlock, len(samples))
			if f.h.block != nil {
				if err := f.h.block(ctx, n); err != nil {
					return err
				}
			}
			if err := job.Out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: fakeRate, Samples: samples[:k]}, Span: span}); err != nil {
				return err
			}
			f.h.blocks.Add(1)
			n++
			samples, span = samples[k:], nil
		}
		if err := job.Out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: fakeRate, EndOfSentence: true}}); err != nil {
			return err
		}
	}
}

// liveAudio is the fake vocoder's audio of a sentence's frames.
func liveAudio(params []float32) []int16 {
	s := make([]int16, 0, liveSamplesPerChar*len(params))
	for _, p := range params {
		for i := range liveSamplesPerChar {
			s = append(s, int16((int(p)*131+i)%20000-10000))
		}
	}
	return s
}

// align sends, at each sentence's end mark, the sentence's words (from
// the request's text so far) spread evenly over its audio, on the
// request's audio timeline.
func (f *liveFake) align(ctx context.Context, job *engine.Job) error {
	var span *engine.Span
	at, samples := 0, 0 // ms of audio before the sentence; its samples
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.Audio == nil {
			return &engine.InputError{Reason: "live-align takes audio"}
		}
		if c.Span != nil {
			span = c.Span
		}
		samples += len(c.Audio.Samples)
		if !c.Audio.EndOfSentence || span == nil {
			continue
		}
		text, _ := job.Prompt.Current()
		ms := samples * 1000 / fakeRate
		words := liveWords(text, *span, at, ms)
		if len(words) > 0 {
			if err := job.Out.Send(ctx, engine.Chunk{Words: &engine.Words{Words: words}}); err != nil {
				return err
			}
		}
		at, samples, span = at+ms, 0, nil
	}
}

// liveWords are the words of text's span, spread evenly over ms
// milliseconds from at.
func liveWords(text string, span engine.Span, at, ms int) []engine.Word {
	rs := []rune(text)
	if span.End > len(rs) {
		panic(fmt.Sprintf("live-align: span %v past the text %q", span, text))
	}
	type w struct{ start, end int }
	var ws []w
	for i := span.Start; i < span.End; {
		for i < span.End && !isWordRune(rs[i]) {
			i++
		}
		j := i
		for j < span.End && isWordRune(rs[j]) {
			j++
		}
		if j > i {
			ws = append(ws, w{i, j})
		}
		i = j
	}
	out := make([]engine.Word, len(ws))
	for k, x := range ws {
		out[k] = engine.Word{Word: string(rs[x.start:x.end]), CharStart: x.start, CharEnd: x.end,
			StartMs: at + ms*k/len(ws), EndMs: at + ms*(k+1)/len(ws)}
	}
	return out
}

func isWordRune(r rune) bool {
	return r != ' ' && r != '\n' && !strings.ContainsRune(".,!?;:", r) && utf8.ValidRune(r)
}
