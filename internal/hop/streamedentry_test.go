package hop_test

// A streamed request through a hop: stage 0 takes the text's pieces as
// they arrive, and a chunk's span crosses in both directions.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// hangGuard bounds a wait that only a broken build makes long: a failure,
// not a measure.
const hangGuard = 20 * time.Second

// chanSink is a Sink whose chunks a test reads as they come.
type chanSink chan engine.Chunk

func (s chanSink) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the next chunk the call sent.
func (s chanSink) next(t *testing.T) engine.Chunk {
	t.Helper()
	select {
	case c := <-s:
		return c
	case <-time.After(hangGuard):
		t.Fatal("no output: the stage did not get the piece before the input ended")
		return engine.Chunk{}
	}
}

// TestCallerStreamedEntry: the Caller of stage 0 streams a streamed
// request's text to the stage server as it arrives (a payload stream from
// stage 0 to stage 0), so the first piece's output comes back while the
// input is still open, the server's stage sees the text so far in its
// prompt's feed, and the rest follows in order.
func TestCallerStreamedEntry(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	codec := payload.NewCodec([]byte("streamed-entry-key-0123456789"))
	feeds := make(chan string, 16)
	hooks := &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if n%2 == 0 {
			text, _ := job.Prompt.Current()
			feeds <- text
		}
		return nil
	}}
	stage := 0
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(hooks)}, api.Options{Stage: &stage, Codec: codec})
	caller, err := hop.NewCaller(cfg, 0, &hop.Client{}, codec)
	if err != nil {
		t.Fatal(err)
	}
	pieces := make(chan engine.Chunk)
	feed := engine.NewFeed()
	out := make(chanSink, 16)
	job := &engine.Job{RequestID: "live-1", Prompt: engine.Prompt{Feed: feed},
		In: engine.Feeding(engine.ChanSource(pieces), feed), Out: out}
	done := make(chan error, 1)
	go func() { done <- caller.Call(context.Background(), srv.URL, job) }()

	pieces <- engine.Chunk{Text: &engine.Text{Text: "one "}}
	for _, want := range []string{"one |a.0", "one |a.1"} {
		if got := out.next(t); got.Text == nil || got.Text.Text != want {
			t.Fatalf("while the input is open: %+v, want %q", got, want)
		}
	}
	if got := <-feeds; got != "one " {
		t.Errorf("the stage server's prompt feed held %q at the first piece, want %q", got, "one ")
	}
	pieces <- engine.Chunk{Text: &engine.Text{Text: "two"}}
	close(pieces)
	var rest []string
	for c := range drain(t, out, done) {
		rest = append(rest, c.Text.Text)
	}
	if want := []string{"two|a.0", "two|a.1"}; !reflect.DeepEqual(rest, want) {
		t.Errorf("after the input ended: %q, want %q", rest, want)
	}
	if got := <-feeds; got != "one two" {
		t.Errorf("the stage server's prompt feed held %q at the second piece, want %q", got, "one two")
	}
	if text, done := feed.Text(); text != "one two" || !done {
		t.Errorf("this side's feed: %q, done %v", text, done)
	}
	hoptest.Idle(t, srv.Orch)
}

// drain yields the rest of a call's output, once the call has returned
// nil.
func drain(t *testing.T, out chanSink, done chan error) func(func(engine.Chunk) bool) {
	return func(yield func(engine.Chunk) bool) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(hangGuard):
			t.Fatal("the call did not end")
		}
		for {
			select {
			case c := <-out:
				if !yield(c) {
					return
				}
			default:
				return
			}
		}
	}
}

// TestStreamedEntryRefusals: a stage 0 stream must come from stage 0, with
// an empty prompt text (its text is in its data frames).
func TestStreamedEntryRefusals(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	stage := 0
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &stage})
	codec := payload.NewCodec(nil)
	for _, tc := range []struct {
		name string
		edit func(e *payload.Envelope)
		want string
	}{
		{"from stage 1", func(e *payload.Envelope) { e.From = 1 }, "payload stream for stage 0 comes from stage 1"},
		{"prompt text", func(e *payload.Envelope) { e.Prompt.Text = "whole" }, "its header's prompt text must be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := &payload.Envelope{Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "x", RequestID: "x",
				To: 0, Final: 2, Outputs: []string{"text"}, Params: make([]json.RawMessage, 3)}
			tc.edit(head)
			pr, pw := io.Pipe()
			go func() {
				sw := codec.NewStreamWriter(pw)
				err := sw.Header(payload.FrameHandOff, head)
				if err == nil {
					err = sw.End()
				}
				pw.CloseWithError(err)
			}()
			_, err := (&hop.Client{}).Open(context.Background(), srv.URL, pr, hop.ContentType)
			var he *hop.HTTPError
			if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Message, tc.want) {
				t.Errorf("%v, want a 400 saying %q", err, tc.want)
			}
		})
	}
}

// TestSpanCrossesHop: a chunk's span travels in the request stream and
// back in the answer (a pass-through stage keeps it), as the talker's
// spans travel to a vocoder on a stage server and its audio's back.
func TestSpanCrossesHop(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline+"    - {id: 1, options: {passthrough: true}}\n")
	stage := 1
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &stage})
	caller, err := hop.NewCaller(cfg, 1, &hop.Client{}, payload.NewCodec(nil))
	if err != nil {
		t.Fatal(err)
	}
	in := []engine.Chunk{
		{Text: &engine.Text{Text: "Hi. "}, Span: &engine.Span{Sentence: 0, Start: 0, End: 3, Text: "Hi."}},
		{Text: &engine.Text{Text: "more"}},
		{Text: &engine.Text{Text: "Is 😀 ok?"}, Span: &engine.Span{Sentence: 1, Start: 4, End: 12, Text: "Is 😀 ok?"}},
	}
	out := &engine.SliceSink{}
	job := &engine.Job{RequestID: "spans", StageID: 1, In: engine.NewSliceSource(in...), Out: out}
	if err := caller.Call(context.Background(), srv.URL, job); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Chunks, in) {
		t.Errorf("through the hop:\n got %+v\nwant %+v", out.Chunks, in)
	}
}
