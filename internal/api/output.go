package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/wire"
)

// collect reads a request's stream to its end and returns its selected
// outputs in the payload's form.
func collect(ctx context.Context, st *orchestrator.Stream) ([]payload.Output, error) {
	res, err := st.Collect(ctx)
	if err != nil {
		return nil, err
	}
	outs := make([]payload.Output, len(res))
	for i, r := range res {
		outs[i] = payload.Output{Stage: r.Stage, Kind: r.Kind, Chunks: r.Chunks}
	}
	return outs, nil
}

// checkModalities refuses output modalities that JSON answers cannot
// carry: the engines' intermediate kinds.
func checkModalities(mods []string) error {
	for _, m := range mods {
		switch engine.Kind(m) {
		case engine.KindFrames, engine.KindSegments:
			return httperr.Errorf(http.StatusBadRequest, string(orchestrator.CodeBadRequest),
				"output modality %q is an intermediate kind this API does not return; select audio, timestamps or text", m)
		}
	}
	return nil
}

// durationMs returns the length of n samples at rate, in milliseconds.
func durationMs(n, rate int) int {
	if rate <= 0 {
		return 0
	}
	return int(int64(n) * 1000 / int64(rate))
}

// wavAudio returns a as a complete WAV file in JSON.
func wavAudio(a *engine.Audio) (*wire.Audio, error) {
	var b bytes.Buffer
	b.Grow(audio.WAVHeaderLen + 2*len(a.Samples))
	if err := audio.WriteWAV(&b, a); err != nil {
		return nil, err
	}
	return &wire.Audio{Format: wire.FormatWAV, SampleRate: a.SampleRate, DurationMs: durationMs(len(a.Samples), a.SampleRate), Data: b.Bytes()}, nil
}

// render turns one output's chunks into its JSON form, by what the chunks
// hold: audio becomes one WAV file, words one list, text one string.
func render(o payload.Output) (wire.Output, error) {
	var out wire.Output
	var text strings.Builder
	hasText := false
	for _, c := range o.Chunks {
		switch {
		case c.Words != nil:
			out.Timestamps = append(out.Timestamps, c.Words.Words...)
		case c.Text != nil:
			text.WriteString(c.Text.Text)
			hasText = true
		case c.Audio != nil:
		default:
			return out, fmt.Errorf("stage %d output: %s chunks cannot be returned as JSON", o.Stage, c.Kind())
		}
	}
	a, err := engine.JoinAudio(o.Chunks)
	if err != nil {
		return out, fmt.Errorf("stage %d output: %w", o.Stage, err)
	}
	if a != nil {
		if out.Audio, err = wavAudio(a); err != nil {
			return out, fmt.Errorf("stage %d output: %w", o.Stage, err)
		}
	}
	if hasText {
		out.Text = text.String()
	}
	if o.Kind == engine.KindTimestamps && out.Timestamps == nil {
		out.Timestamps = []engine.Word{}
	}
	return out, nil
}

// merge renders outs into one answer by modality; a later output of a
// modality replaces an earlier one.
func merge(outs []payload.Output) (*wire.Output, error) {
	var m wire.Output
	for _, o := range outs {
		r, err := render(o)
		if err != nil {
			return nil, err
		}
		if r.Audio != nil {
			m.Audio = r.Audio
		}
		if r.Timestamps != nil {
			m.Timestamps = r.Timestamps
		}
		if r.Text != "" {
			m.Text = r.Text
		}
	}
	return &m, nil
}

// chunkOutput is one streamed chunk in JSON: audio as raw PCM.
func chunkOutput(c engine.Chunk) (wire.Output, error) {
	var out wire.Output
	switch {
	case c.Audio != nil:
		out.Audio = &wire.Audio{Format: wire.FormatPCM, SampleRate: c.Audio.SampleRate,
			DurationMs: durationMs(len(c.Audio.Samples), c.Audio.SampleRate), Data: audio.PCMBytes(c.Audio.Samples)}
	case c.Words != nil:
		out.Timestamps = c.Words.Words
		if out.Timestamps == nil {
			out.Timestamps = []engine.Word{}
		}
	case c.Text != nil:
		out.Text = c.Text.Text
	default:
		return out, fmt.Errorf("%s chunks cannot be returned as JSON", c.Kind())
	}
	return out, nil
}
