package orchestrator

import (
	"context"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// TestStreamedRequest: a request whose text arrives while it runs gets its
// first output before its input ends, every stage's prompt feed holds the
// text that reached the entry stage by the time the stage's input does,
// and the feed is complete at the end.
func TestStreamedRequest(t *testing.T) {
	feeds := make(chan string, 16)
	f := newFixture(t, setup{hooks: testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if e.Spec.Name == "post" {
			text, _ := job.Prompt.Current()
			feeds <- text
		}
		return nil
	}}})
	in := make(chan engine.Chunk)
	s, err := f.o.Submit(context.Background(), Request{ID: "live", Input: engine.ChanSource(in)})
	if err != nil {
		t.Fatal(err)
	}
	in <- engine.Chunk{Text: &engine.Text{Text: "one "}}
	out, err := s.Recv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Chunk.Text.Text != "one |talker.0|vocoder.0|post.0" {
		t.Errorf("first output %q", out.Chunk.Text.Text)
	}
	if got := <-feeds; got != "one " {
		t.Errorf("the last stage's prompt feed held %q with the first piece's output, want %q", got, "one ")
	}
	in <- engine.Chunk{Text: &engine.Text{Text: "two"}}
	close(in)
	rest, err := collect(t, s)
	if err != nil || len(rest) != 1 {
		t.Fatalf("the rest: %v, %v", texts(rest), err)
	}
	if got := <-feeds; got != "one two" {
		t.Errorf("the last stage's prompt feed held %q with the second piece's output, want %q", got, "one two")
	}
	f.assertIdle()

	// A streamed request takes no prompt text besides its input.
	_, err = f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "x"}, Input: engine.ChanSource(in)})
	codeIs(t, err, CodeBadRequest)
}
