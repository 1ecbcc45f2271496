package sphinx

import (
	"context"
	"io"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// chanSource yields the chunks sent on its channel until it is closed.
type chanSource chan engine.Chunk

func (s chanSource) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-s:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// chanSink passes each chunk sent to it on its channel.
type chanSink chan engine.Chunk

func (s chanSink) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestStreamedSentences feeds the aligner speech a sentence at a time,
// each sentence's audio followed by its end mark, as the vocoder sends it.
// The first sentence's timestamps must come before the second sentence's
// audio is sent (the test holds it back until they do), each sentence's
// in a chunk of its own, timed from the start of the whole audio and as
// close to flite's own times as a whole alignment is.
func TestStreamedSentences(t *testing.T) {
	a := sharedAligner(t)
	parts := []string{sentences[0], "Please call Stella.", sentences[3]}
	text := parts[0] + " " + parts[1] + " " + parts[2]
	in, out := make(chanSource), make(chanSink)
	done := make(chan error, 1)
	go func() {
		done <- a.Process(context.Background(), &engine.Job{Prompt: engine.Prompt{Text: text}, In: in, Out: out})
	}()

	var truth []engine.Word
	offsetMs, total := 0, 0
	var got []engine.Word
	chunks := 0
	for i, p := range parts {
		s := synth(t, p, "slt")
		for _, w := range s.truth {
			w.StartMs += offsetMs
			w.EndMs += offsetMs
			truth = append(truth, w)
		}
		in <- engine.Chunk{Audio: s.audio}
		in <- engine.Chunk{Audio: &engine.Audio{SampleRate: s.audio.SampleRate, EndOfSentence: true}}
		offsetMs += durationMs(s.audio)
		total += len(s.audio.Samples)
		if i == 2 {
			close(in)
		}
		var c engine.Chunk
		select {
		case c = <-out:
		case err := <-done:
			t.Fatalf("Process returned %v before sentence %d's timestamps", err, i)
		}
		if c.Words == nil {
			t.Fatalf("chunk %q, want timestamps", c.Kind())
		}
		chunks++
		got = append(got, c.Words.Words...)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	words, err := transcript(text, "slt")
	if err != nil {
		t.Fatal(err)
	}
	want := entries(text, words, truth)
	mean := checkWords(t, got, want, total*1000/16000)
	t.Logf("%d chunks, mean boundary error %.1f ms over %d entries", chunks, mean, len(got))
	if mean > maxMeanErrorMs {
		t.Errorf("mean boundary error %.1f ms, want <= %d", mean, maxMeanErrorMs)
	}
}

// TestStreamedSentencesMismatch checks that audio marked into fewer
// sentences than the transcript has still gets every word timed, in order.
func TestStreamedSentencesMismatch(t *testing.T) {
	a := sharedAligner(t)
	text := "Please call Stella. Ask her to bring these things with her from the store."
	s := synth(t, text, "slt") // one utterance: one mark for two sentences
	sink := &engine.SliceSink{}
	err := a.Process(context.Background(), &engine.Job{
		Prompt: engine.Prompt{Text: text},
		In:     engine.NewSliceSource(engine.Chunk{Audio: s.audio}, engine.Chunk{Audio: &engine.Audio{SampleRate: s.audio.SampleRate, EndOfSentence: true}}),
		Out:    sink,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := engine.JoinWords(sink.Chunks)
	if len(got) != len(s.entries) {
		t.Fatalf("%d entries, want %d", len(got), len(s.entries))
	}
	checkShape(t, got, durationMs(s.audio))
}
