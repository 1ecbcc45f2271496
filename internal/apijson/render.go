package apijson

// Rendering engine outputs into the JSON shapes: audio, timestamps and
// text.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// DurationMs returns the length of n samples at rate, in milliseconds.
func DurationMs(n, rate int) int {
	if rate <= 0 {
		return 0
	}
	return int(int64(n) * 1000 / int64(rate))
}

// WAV returns a as a complete WAV file in JSON.
func WAV(a *engine.Audio) (*Audio, error) {
	b, err := audio.AppendWAV(nil, a)
	if err != nil {
		return nil, err
	}
	return &Audio{Format: FormatWAV, SampleRate: a.SampleRate, DurationMs: DurationMs(len(a.Samples), a.SampleRate), Data: b}, nil
}

// Render turns one whole output, the chunks that serve modality kind, into
// its JSON form by what the chunks hold: audio becomes one WAV file,
// words one list, text one string, regions one list (or, for kind text,
// their text: lines joined by newlines). Timestamps is set (possibly
// empty) when kind is timestamps, Regions when kind is regions.
func Render(kind engine.Kind, chunks []engine.Chunk) (Outputs, error) {
	if len(chunks) > 0 && chunks[0].Regions != nil {
		if c := slices.IndexFunc(chunks, func(c engine.Chunk) bool { return c.Regions == nil }); c >= 0 {
			return Outputs{}, fmt.Errorf("%s chunks among regions", chunks[c].Kind())
		}
		return renderRegions(kind, chunks), nil
	}
	if kind == engine.KindRegions {
		return Outputs{Regions: []Region{}}, nil
	}
	var out Outputs
	var text strings.Builder
	hasText := false
	for _, c := range chunks {
		switch {
		case c.Words != nil:
			out.Timestamps = append(out.Timestamps, c.Words.Words...)
		case c.Text != nil:
			text.WriteString(c.Text.Text)
			hasText = true
		case c.Audio != nil:
		default:
			return out, fmt.Errorf("%s chunks cannot be returned as JSON", c.Kind())
		}
	}
	a, err := engine.JoinAudio(chunks)
	if err != nil {
		return out, err
	}
	if a != nil {
		if out.Audio, err = WAV(a); err != nil {
			return out, err
		}
	}
	if hasText {
		out.Text = text.String()
	}
	if kind == engine.KindTimestamps && out.Timestamps == nil {
		out.Timestamps = []engine.Word{}
	}
	return out, nil
}

// RenderChunk is one streamed chunk in JSON: audio as raw PCM.
func RenderChunk(c engine.Chunk) (Outputs, error) {
	var out Outputs
	switch {
	case c.Audio != nil:
		out.Audio = &Audio{Format: FormatPCM, SampleRate: c.Audio.SampleRate,
			DurationMs: DurationMs(len(c.Audio.Samples), c.Audio.SampleRate), Data: audio.PCMBytes(c.Audio.Samples)}
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
