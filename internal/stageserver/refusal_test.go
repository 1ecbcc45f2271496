package stageserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// threeStages is three text stages: a hand-off for stage 2 is refused by
// stage 1's server.
const threeStages = `
pipeline:
  name: three
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}
`

// TestRefusedStreamAnswered posts to stage 1's server a signed hand-off
// for stage 2 and goes on sending its stream for a second, as a long
// hand-off of audio would, before reading the answer: the server, which
// refused the stream at its header, must still be reading it, so that
// the answer, a 400 wrong_stage, is not lost to a reset connection (a
// server that stopped reading closes the connection half a second after
// its answer).
func TestRefusedStreamAnswered(t *testing.T) {
	cfg := testkit.Parse(t, threeStages)
	srv := stageOne(t, cfg, nil, api.Options{})
	var head bytes.Buffer
	env := &payload.Envelope{Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "wrong", RequestID: "wrong",
		From: 1, To: 2, Final: 2, Outputs: []string{"text"}, Params: make([]json.RawMessage, cfg.Route.NumIDs())}
	if err := payload.NewCodec([]byte(rawKey)).NewStreamWriter(&head).Header(payload.FrameHandOff, env); err != nil {
		t.Fatal(err)
	}
	c := dialHop(t, srv.URL)
	if err := c.send(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	more := make([]byte, 16<<10)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if err := c.send(more); err != nil {
			t.Fatalf("sending the rest of the stream after the refusal: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // a stage making its stream
	}
	resp := c.answer(t)
	if code, msg := errorAnswer(t, resp); resp.StatusCode != http.StatusBadRequest || code != "wrong_stage" {
		t.Errorf("answer %d %s: %s; want 400 wrong_stage", resp.StatusCode, code, msg)
	}
	unbound(t, srv)
}
