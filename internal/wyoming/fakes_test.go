package wyoming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/omnistage/omnistage/internal/engine"
)

// speaker is a test talker that makes audio itself (text in, audio out):
// it finds sentence ends (., ! or ?) across its input's pieces and speaks
// each sentence as soon as its end arrives, what is left at the input's
// end last. A sentence is one audio chunk of a sample per byte of its
// text, the byte's value times its voice's number (amy 1, bob 2), then an
// end-of-sentence mark. A sentence "fail." fails the job with an input
// error; one starting "big" is bigChunks chunks of a second each; and
// "wait." waits for the hooks' gate.
type speaker struct {
	rate  int
	hooks *speakerHooks
}

// speakerHooks steer and watch the speakers of one test.
type speakerHooks struct {
	gate    chan struct{} // "wait." waits until it is closed (release)
	once    sync.Once
	waiting chan struct{} // gets a value when a speaker starts waiting
	// sent counts the chunks sent, ended the jobs returned, and lastErr is
	// the error the last one returned with.
	sent, ended atomic.Int64
	mu          sync.Mutex
	lastErr     error
}

func newSpeakerHooks() *speakerHooks {
	return &speakerHooks{gate: make(chan struct{}), waiting: make(chan struct{}, 16)}
}

// release lets every "wait." go on.
func (h *speakerHooks) release() { h.once.Do(func() { close(h.gate) }) }

func (h *speakerHooks) jobErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

// bigChunks is how many one-second chunks a "big" sentence makes: far
// more than the pipeline's buffers and a loopback socket's hold.
const bigChunks = 1000

// speakerVoices are the speaker's voices.
var speakerVoices = []engine.Voice{
	{ID: "amy", Name: "Amy", Language: "en-US", Gender: "female"},
	{ID: "bob", Name: "Bob", Language: "de-DE", Gender: "male"},
}

// registerSpeaker registers the speaker as test-speaker.
func registerSpeaker(r *engine.Registry, hooks *speakerHooks) {
	r.Register("test-speaker", engine.Driver{
		Voices: speakerVoices,
		New: func(spec engine.Spec) (engine.Engine, error) {
			var opts struct {
				Rate int `json:"rate"`
			}
			if err := spec.Options.Decode(&opts); err != nil {
				return nil, err
			}
			return &speaker{rate: max(opts.Rate, 16000), hooks: hooks}, nil
		},
	})
}

func (s *speaker) Warm(context.Context) error { return nil }
func (s *speaker) Close() error               { return nil }

func (s *speaker) CheckParams(raw json.RawMessage) error {
	var p struct {
		Voice string `json:"voice"`
	}
	if err := engine.DecodeParams(raw, &p); err != nil {
		return err
	}
	if p.Voice != "" && voiceNumber(p.Voice) == 0 {
		return &engine.ParamError{Field: "voice", Reason: "unknown voice " + p.Voice}
	}
	return nil
}

func voiceNumber(v string) int16 {
	switch v {
	case "", "amy":
		return 1
	case "bob":
		return 2
	}
	return 0
}

func (s *speaker) Process(ctx context.Context, job *engine.Job) (err error) {
	defer func() {
		s.hooks.mu.Lock()
		s.hooks.lastErr = err
		s.hooks.mu.Unlock()
		s.hooks.ended.Add(1)
	}()
	var p struct {
		Voice string `json:"voice"`
	}
	if err := engine.DecodeParams(job.Params, &p); err != nil {
		return err
	}
	k := voiceNumber(p.Voice)
	var pending strings.Builder
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return s.say(ctx, job, pending.String(), k)
		}
		if err != nil {
			return err
		}
		if c.Text == nil {
			return fmt.Errorf("speaker: a %s chunk", c.Kind())
		}
		for _, r := range c.Text.Text {
			pending.WriteRune(r)
			if strings.ContainsRune(".!?", r) {
				if err := s.say(ctx, job, pending.String(), k); err != nil {
					return err
				}
				pending.Reset()
			}
		}
	}
}

// say speaks one sentence.
func (s *speaker) say(ctx context.Context, job *engine.Job, sentence string, k int16) error {
	text := strings.TrimSpace(sentence)
	if text == "" {
		return nil
	}
	switch {
	case text == "fail.":
		return &engine.InputError{Reason: "the speaker was asked to fail"}
	case text == "wait.":
		s.hooks.waiting <- struct{}{}
		select {
		case <-s.hooks.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	case strings.HasPrefix(text, "big"):
		for range bigChunks {
			if err := s.send(ctx, job, &engine.Audio{SampleRate: s.rate, Samples: make([]int16, s.rate)}); err != nil {
				return err
			}
		}
	}
	samples := make([]int16, len(text))
	for i := range len(text) {
		samples[i] = int16(text[i]) * k
	}
	if err := s.send(ctx, job, &engine.Audio{SampleRate: s.rate, Samples: samples}); err != nil {
		return err
	}
	return s.send(ctx, job, &engine.Audio{SampleRate: s.rate, EndOfSentence: true})
}

func (s *speaker) send(ctx context.Context, job *engine.Job, a *engine.Audio) error {
	if err := job.Out.Send(ctx, engine.Chunk{Audio: a}); err != nil {
		return err
	}
	s.hooks.sent.Add(1)
	return nil
}

// spoken is the speaker's audio of text with voice k, sentence by
// sentence, as the server should relay it.
func spoken(text string, k int16) [][]int16 {
	var out [][]int16
	var pending strings.Builder
	flush := func() {
		t := strings.TrimSpace(pending.String())
		pending.Reset()
		if t == "" {
			return
		}
		s := make([]int16, len(t))
		for i := range len(t) {
			s[i] = int16(t[i]) * k
		}
		out = append(out, s)
	}
	for _, r := range text {
		pending.WriteRune(r)
		if strings.ContainsRune(".!?", r) {
			flush()
		}
	}
	flush()
	return out
}
