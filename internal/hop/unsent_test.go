package hop_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// countingSource counts the chunks taken from it.
type countingSource struct {
	engine.Source
	taken atomic.Int32
}

func (s *countingSource) Recv(ctx context.Context) (engine.Chunk, error) {
	ch, err := s.Source.Recv(ctx)
	if err == nil {
		s.taken.Add(1)
	}
	return ch, err
}

// TestCallerUnsent: a call whose connection is refused takes nothing of
// its input and says so (TransportError.Unsent), so it can be made again
// elsewhere; a call whose connection breaks after the server read its
// body does not.
func TestCallerUnsent(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	codec := payload.NewCodec(nil)
	refused := "http://" + testkit.FreeAddr(t)
	// A server that reads the whole body, then drops the connection.
	dropping := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer dropping.Close()
	for stage := range 2 {
		caller, err := hop.NewCaller(cfg, stage, &hop.Client{}, codec)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			url    string
			unsent bool
		}{{"refused", refused, true}, {"dropped", dropping.URL, false}} {
			in := &countingSource{Source: engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: "one"}})}
			job := &engine.Job{RequestID: "u", StageID: stage, In: in, Out: &engine.SliceSink{}}
			err := caller.Call(context.Background(), tc.url, job)
			var te *hop.TransportError
			if !errors.As(err, &te) {
				t.Fatalf("stage %d, %s: %v, want a transport error", stage, tc.name, err)
			}
			if te.Unsent != tc.unsent {
				t.Errorf("stage %d, %s: Unsent = %v, want %v (%v)", stage, tc.name, te.Unsent, tc.unsent, err)
			}
			if taken := in.taken.Load() > 0; taken == tc.unsent {
				t.Errorf("stage %d, %s: the input was taken: %v, unsent: %v", stage, tc.name, taken, tc.unsent)
			}
		}
	}
}
