package flite

import (
	"context"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// runTurns runs e on in with a Turner in its ctx and returns its output
// and the turns it took.
func runTurns(t *testing.T, e engine.Engine, in ...engine.Chunk) ([]engine.Chunk, *testengine.Turns) {
	t.Helper()
	turns := &testengine.Turns{}
	sink := &engine.SliceSink{}
	if err := e.Process(turns.Context(context.Background()), &engine.Job{In: engine.NewSliceSource(in...), Out: sink}); err != nil {
		t.Fatal(err)
	}
	return sink.Chunks, turns
}

// TestTurns: the talker takes a turn per sentence, the vocoder one per
// sentence that a clustergen synthesis yields after each block; every
// turn ends, one is held at a time, and the output is what it is without
// turns.
func TestTurns(t *testing.T) {
	for _, voice := range Voices() {
		t.Run(voice, func(t *testing.T) {
			mid, talked := runTurns(t, talkerFor(t, voice), text(fewSentences))
			if want := sentenceChunks(t, voice, fewSentences, ""); !slices.EqualFunc(mid, want, sameChunk) {
				t.Fatal("the talker's output differs with turns")
			}
			checkTurns(t, "talker", talked, len(mid), 0)
			out, vocoded := runTurns(t, vocoderFor(t, voice), mid...)
			plain, err := run(vocoderFor(t, voice), "", mid...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(out, plain, sameChunk) {
				t.Fatal("the vocoder's output differs with turns")
			}
			blocks := 0
			for _, c := range out {
				if c.Audio != nil && len(c.Audio.Samples) > 0 {
					blocks++
				}
			}
			v, _ := lookupVoice(voice)
			if v.kind != engine.KindFrames {
				blocks = 0 // a diphone synthesis is one call, with no blocks to yield at
			}
			checkTurns(t, "vocoder", vocoded, len(mid), blocks)
		})
	}
}

// checkTurns checks that turns has taken a turn per unit, ended each, held
// one at a time and yielded yields times.
func checkTurns(t *testing.T, what string, turns *testengine.Turns, units, yields int) {
	t.Helper()
	taken, ended, yielded, most := turns.Counts()
	if taken != units || ended != taken || most != 1 || yielded != yields {
		t.Errorf("%s: %d turns taken, %d ended, %d at most at once, %d yields; want %d, all ended, 1, %d yields",
			what, taken, ended, most, yielded, units, yields)
	}
}

// sameChunk compares the audio, frames or segments of two chunks.
func sameChunk(a, b engine.Chunk) bool {
	switch {
	case a.Audio != nil && b.Audio != nil:
		return a.Audio.SampleRate == b.Audio.SampleRate && a.Audio.EndOfSentence == b.Audio.EndOfSentence && slices.Equal(a.Audio.Samples, b.Audio.Samples)
	case a.Frames != nil && b.Frames != nil:
		return slices.Equal(a.Frames.Params, b.Frames.Params) && slices.Equal(a.Frames.Str, b.Frames.Str)
	case a.Segments != nil && b.Segments != nil:
		return slices.Equal(a.Segments.Names, b.Segments.Names) && slices.Equal(a.Segments.Ends, b.Segments.Ends)
	}
	return false
}
