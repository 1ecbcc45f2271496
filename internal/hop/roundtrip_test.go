package hop_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestCallerServerRoundTrip runs each stage of hoptest.TextPipeline through both
// sides of a hop, the Caller (what a placement calls) against the Server
// (behind a headless stage server), and compares what comes back with the
// same stage run in process: the entry stage (a JSON request, a hand-off
// answer), a middle stage (a stream both ways) and the last (a result
// stream). A Caller with another key is refused, naming why.
func TestCallerServerRoundTrip(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	codec := payload.NewCodec([]byte("round-trip-key-0123456789"))
	local := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{})
	in := []engine.Chunk{{Text: &engine.Text{Text: "one"}}, {Text: &engine.Text{Text: "two"}}, {Text: &engine.Text{Text: "three"}}}
	params := json.RawMessage(`{"tag":"p"}`)
	for stage := range 3 {
		input := in
		if stage == 0 {
			input = in[:1]
		}
		// The stage in process, through a stage call of the orchestrator.
		st, err := local.Orch.SubmitStage(context.Background(), orchestrator.StageCall{
			ID: "local", Stage: stage, Params: paramsAt(stage, params), Input: engine.NewSliceSource(input...),
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := texts(res[0].Chunks)

		s := stage
		url := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &s, Codec: codec}).URL
		caller, err := hop.NewCaller(cfg, stage, &hop.Client{}, codec)
		if err != nil {
			t.Fatal(err)
		}
		out := &engine.SliceSink{}
		job := &engine.Job{RequestID: "r1", StageID: stage, Params: params, In: engine.NewSliceSource(input...), Out: out}
		if err := caller.Call(context.Background(), url, job); err != nil {
			t.Fatalf("stage %d: %v", stage, err)
		}
		if got := texts(out.Chunks); got != want || got == "" {
			t.Errorf("stage %d through a hop: %q, in process: %q", stage, got, want)
		}

		if stage == 0 {
			continue // the entry stage's JSON request is not signed
		}
		forger, _ := hop.NewCaller(cfg, stage, &hop.Client{}, payload.NewCodec([]byte("another-key-just-as-long-0123")))
		job = &engine.Job{RequestID: "r2", StageID: stage, In: engine.NewSliceSource(input...), Out: &engine.SliceSink{}}
		err = forger.Call(context.Background(), url, job)
		var he *hop.HTTPError
		if !errors.As(err, &he) || he.Status != 400 || he.Code != payload.CodeKeyUnknown {
			t.Errorf("stage %d, another key: %v", stage, err)
		}
	}
}

// paramsAt is a sampling_params array with p at index id.
func paramsAt(id int, p json.RawMessage) []json.RawMessage {
	ps := make([]json.RawMessage, 3)
	ps[id] = p
	return ps
}

// texts joins the chunks' texts.
func texts(cs []engine.Chunk) string {
	var s string
	for i, c := range cs {
		if i > 0 {
			s += " / "
		}
		if c.Text != nil {
			s += c.Text.Text
		}
	}
	return s
}
