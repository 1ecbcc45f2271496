package wyoming

// A synthesis: its request to a pipeline, and its audio relayed to the
// client as audio-start, audio-chunk and audio-stop events as the
// pipeline makes it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// The forms of a synthesis, as the metrics name them.
const (
	formWhole  = "whole"
	formStream = "stream"
)

// request returns the request of a synthesis with voice ("": the
// talker's default): audio only, the voice as the talker's param.
func (t *target) request(voice string) (orchestrator.Request, error) {
	req := orchestrator.Request{Modalities: []string{string(engine.KindAudio)}}
	var err error
	req.Params, err = talker.Params{Voice: voice}.SamplingParams(t.orch.Config().Route.NumIDs())
	return req, err
}

// synthesize speaks a synthesize event's text: one audio-start, the
// audio-chunks as they are made, one audio-stop.
func (ss *session) synthesize(ev event) error {
	d, err := parseSynthesize(ev, true)
	if err != nil {
		return err
	}
	t, voice, err := ss.srv.cat.resolve(d.Voice)
	if err != nil {
		ss.srv.m.syntheses.WithLabelValues(formWhole, "failed").Inc()
		return ss.fail(CodeUnknownVoice, "%v", err)
	}
	if len(d.Text) > ss.srv.opts.MaxTextBytes {
		ss.srv.m.syntheses.WithLabelValues(formWhole, "failed").Inc()
		return ss.fail(CodeTextTooLong, "synthesize event: %d bytes of text are over the limit of %d", len(d.Text), ss.srv.opts.MaxTextBytes)
	}
	sp := ss.newSpeech(false)
	if strings.TrimSpace(d.Text) == "" {
		// Nothing to say: the audio stream is empty.
		ss.srv.m.syntheses.WithLabelValues(formWhole, "ok").Inc()
		return sp.finish()
	}
	req, err := t.request(voice)
	if err != nil {
		return ss.failSynthesis(formWhole, err)
	}
	req.Prompt.Text = d.Text
	return ss.speak(formWhole, t, req, sp)
}

// speak runs req on t's pipeline and relays its audio through sp, to the
// end of the audio stream.
func (ss *session) speak(form string, t *target, req orchestrator.Request, sp *speech) error {
	st, err := t.orch.Submit(ss.ctx, req)
	if err != nil {
		return ss.failSynthesis(form, err)
	}
	defer st.Close()
	ss.log.Debug("wyoming synthesis", "request_id", st.ID(), "pipeline", t.name, "form", form)
	if err := sp.relay(ss.ctx, st); err != nil {
		return ss.failSynthesis(form, err)
	}
	if err := sp.finish(); err != nil {
		return ss.failSynthesis(form, &writeError{err})
	}
	ss.srv.m.syntheses.WithLabelValues(form, "ok").Inc()
	return nil
}

// failSynthesis ends a synthesis that failed with err: the session ends,
// after an error event with the HTTP API's code for err unless the client
// is gone or the session is ending anyway.
func (ss *session) failSynthesis(form string, err error) error {
	var we *writeError
	switch {
	case errors.As(err, &we):
		ss.srv.m.syntheses.WithLabelValues(form, "cancelled").Inc()
		return we.err
	case ss.ctx.Err() != nil:
		ss.srv.m.syntheses.WithLabelValues(form, "cancelled").Inc()
		return ss.ctxEnd()
	}
	ss.srv.m.syntheses.WithLabelValues(form, "failed").Inc()
	_, _, code := httperr.Classify(err)
	return ss.fail(code, "%v", err)
}

// writeError is a write to the client that failed: the connection is
// broken, and nothing more can be said on it.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// speech relays one synthesis's audio to the client. With perSentence
// (the streaming form), each sentence's audio is an audio stream of its
// own, from its first samples to its end-of-sentence mark; else the whole
// synthesis's audio is one.
type speech struct {
	w           *writer
	perSentence bool
	open        bool  // an audio-start was sent without its audio-stop
	rate        int   // the open stream's
	sent        int64 // samples sent in the open stream
	data, pcm   []byte
}

func (ss *session) newSpeech(perSentence bool) *speech {
	return &speech{w: ss.w, perSentence: perSentence}
}

// relay sends st's final audio as it comes, to st's end. A failed write
// is a *writeError.
func (sp *speech) relay(ctx context.Context, st *orchestrator.Stream) error {
	for {
		out, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !out.Final || out.Chunk.Audio == nil {
			continue
		}
		if err := sp.audio(out.Chunk.Audio); err != nil {
			return err
		}
		// Each chunk leaves as it comes: its first audio is what a voice
		// assistant waits for.
		if err := sp.w.flush(); err != nil {
			return &writeError{err}
		}
	}
}

// audio sends a's samples, in audio-chunks of at most 100 ms, opening an
// audio stream first when none is open (or the rate changed), and closes
// the stream at a's end-of-sentence mark when perSentence.
func (sp *speech) audio(a *engine.Audio) error {
	if len(a.Samples) > 0 {
		if a.SampleRate <= 0 {
			return fmt.Errorf("wyoming: the pipeline made audio at %d Hz", a.SampleRate)
		}
		if sp.open && a.SampleRate != sp.rate {
			if err := sp.stop(); err != nil {
				return err
			}
		}
		if !sp.open {
			sp.open, sp.rate, sp.sent = true, a.SampleRate, 0
			sp.data = appendAudioData(sp.data[:0], sp.rate, -1)
			if err := sp.w.writeRaw(typeAudioStart, sp.data, nil, false); err != nil {
				return &writeError{err}
			}
		}
		block := max(1, sp.rate/10)
		for samples := a.Samples; len(samples) > 0; {
			n := min(block, len(samples))
			sp.data = appendAudioData(sp.data[:0], sp.rate, sp.sent*1000/int64(sp.rate))
			sp.pcm = audio.AppendPCMBytes(sp.pcm[:0], samples[:n])
			if err := sp.w.writeRaw(typeAudioChunk, sp.data, sp.pcm, false); err != nil {
				return &writeError{err}
			}
			samples, sp.sent = samples[n:], sp.sent+int64(n)
		}
	}
	if a.EndOfSentence && sp.perSentence && sp.open {
		return sp.stop()
	}
	return nil
}

// stop closes the open audio stream.
func (sp *speech) stop() error {
	sp.open = false
	if err := sp.w.writeRaw(typeAudioStop, nil, nil, false); err != nil {
		return &writeError{err}
	}
	return nil
}

// finish ends the synthesis's audio: its open stream is closed (and a
// whole synthesis's is closed even when nothing was said, since its
// client waits for the audio-stop), and what is written is flushed.
func (sp *speech) finish() error {
	if sp.open || !sp.perSentence {
		if err := sp.stop(); err != nil {
			return err
		}
	}
	return sp.w.flush()
}
