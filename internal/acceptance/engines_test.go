package acceptance

import (
	"context"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/shipped"
)

// newEngine builds and warms one replica of a shipped engine, as the
// runtime does, and closes it when tb ends.
func newEngine(tb testing.TB, name string, in, out engine.Kind, opts engine.Options) engine.Engine {
	tb.Helper()
	d, ok := shipped.Registry().Lookup(name)
	if !ok {
		tb.Fatalf("no engine %q", name)
	}
	e, err := d.New(engine.Spec{Name: name, Input: in, Output: out, Options: opts})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	if err := e.Warm(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return e
}

// talkerKind is what a voice's talker makes.
func talkerKind(voice string) engine.Kind {
	if voice == "kal16" {
		return engine.KindSegments
	}
	return engine.KindFrames
}

func newTalker(tb testing.TB, voice string) engine.Engine {
	return newEngine(tb, flite.TalkerName, engine.KindText, talkerKind(voice), engine.Options{"voice": voice})
}

// process runs one job on e with the given prompt and input chunks and
// returns its output.
func process(ctx context.Context, e engine.Engine, prompt string, in ...engine.Chunk) ([]engine.Chunk, error) {
	sink := &engine.SliceSink{}
	err := e.Process(ctx, &engine.Job{
		Prompt: engine.Prompt{Text: prompt},
		In:     engine.NewSliceSource(in...),
		Out:    sink,
	})
	return sink.Chunks, err
}

func textChunk(s string) engine.Chunk { return engine.Chunk{Text: &engine.Text{Text: s}} }

// sentences returns how many utterances the talker makes of text: it
// sends one chunk per sentence.
func sentences(t *testing.T, voice, text string) int {
	t.Helper()
	chunks, err := process(context.Background(), newTalker(t, voice), "", textChunk(text))
	if err != nil {
		t.Fatal(err)
	}
	return len(chunks)
}
