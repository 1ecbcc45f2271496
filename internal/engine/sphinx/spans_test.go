package sphinx

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// spanned returns the chunks of sp, the speech of text a sentence at a
// time, with each sentence's span on its first block, as the talker and
// vocoder of a streamed request send them.
func spanned(t *testing.T, sp spoken, text, voice string) []engine.Chunk {
	t.Helper()
	words, err := transcript(text, voice)
	if err != nil {
		t.Fatal(err)
	}
	runes, groups := []rune(text), bySentence(words)
	var out []engine.Chunk
	for i, cs := range sp.sentences {
		start, end := groups[i][0].charStart, len(runes)
		if i+1 < len(groups) {
			end = groups[i+1][0].charStart
		}
		first := cs[0]
		first.Span = &engine.Span{Sentence: i, Start: start, End: end, Text: string(runes[start:end])}
		out = append(append(out, first), cs[1:]...)
	}
	return out
}

// TestSpannedTranscript aligns a request whose text is not given (a
// streamed request's): with spans on its audio, the timestamps are those
// of the text given whole; without them, the text that arrived in
// Prompt.Feed is aligned once the audio has ended, as accurately; with
// neither, and with a span that does not hold its
// text, it is bad input.
func TestSpannedTranscript(t *testing.T) {
	a := sharedAligner(t)
	text := committee
	sp := speakSentences(t, text, "slt")
	want, err := run(context.Background(), a, text, sp.chunks()...)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run(context.Background(), a, "", spanned(t, sp, text, "slt")...); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("from spans: %v\n got %v\nwant %v", err, got, want)
	}

	feed := engine.NewFeed()
	feed.Append(text)
	feed.Close()
	sink := &engine.SliceSink{}
	err = a.Process(context.Background(), &engine.Job{Prompt: engine.Prompt{Feed: feed}, In: engine.NewSliceSource(sp.chunks()...), Out: sink})
	if err != nil {
		t.Fatalf("from the feed: %v", err)
	}
	if mean := checkWords(t, engine.JoinWords(sink.Chunks), sp.entries, sp.durMs); mean > maxMeanErrorMs {
		t.Errorf("from the feed: mean boundary error %.1f ms, want <= %d", mean, maxMeanErrorMs)
	}

	bad := spanned(t, sp, text, "slt")
	bad[0].Span.End++
	for name, chunks := range map[string][]engine.Chunk{"no spans, no feed": sp.chunks(), "a span short of its end": bad} {
		var ie *engine.InputError
		if _, err := run(context.Background(), a, "", chunks...); !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an InputError", name, err)
		}
	}
}
