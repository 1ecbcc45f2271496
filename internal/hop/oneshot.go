package hop

// The one-shot form of POST /v1/run: the stage runs on its whole input,
// and the answer is one JSON object, a hand-off to the next stage or the
// request's selected outputs.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unsafe"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/payload"
)

// runOneShot runs the call and answers with one JSON object: the payload
// for the next stage, or the request's selected outputs when the stage is
// its final one.
func (s *Server) runOneShot(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.submit(r, c)
	if err != nil {
		return err
	}
	defer st.Close()
	w.Header().Set("X-Request-Id", c.env.RequestID)
	res, err := st.Collect(r.Context())
	if err != nil {
		return err
	}
	resp, err := s.answer(c, res[0].Chunks)
	if err != nil {
		return err
	}
	if resp.Finished {
		httpbody.WriteJSON(w, http.StatusOK, resp)
		return nil
	}
	s.writeHandOff(w, resp)
	return nil
}

// answer builds the one-shot answer from the stage's output.
func (s *Server) answer(c *call, data []engine.Chunk) (*RunResponse, error) {
	env := c.env
	// The incoming data is the output of env.From; it travels on when the
	// request selected it.
	keep := env.From != c.stage && c.sel.Returns(env.From)
	if c.stage == c.sel.Final {
		_, spec := s.cfg.StageSpec(c.stage, 0)
		outs := append(env.Carry(keep), payload.StageOutput{Stage: c.stage, Kind: spec.Output, Chunks: data})
		out, err := merge(outs)
		if err != nil {
			return nil, err
		}
		return &RunResponse{RequestID: env.RequestID, StageID: c.stage, Finished: true, Output: out}, nil
	}
	next, ok := c.sel.Next(c.stage)
	if !ok {
		return nil, fmt.Errorf("hop: stage %d has no successor on the selection %v", c.stage, c.sel.Stages)
	}
	enc, err := s.codec.Encode(env.Next(next, data, keep))
	if err != nil {
		return nil, fmt.Errorf("hop: %w", err)
	}
	return &RunResponse{RequestID: env.RequestID, StageID: next, StageInput: enc}, nil
}

// merge renders outs into one answer by modality; a later output of a
// modality replaces an earlier one.
func merge(outs []payload.StageOutput) (*apijson.Outputs, error) {
	var m apijson.Outputs
	for _, o := range outs {
		r, err := apijson.Render(o.Kind, o.Chunks)
		if err != nil {
			return nil, fmt.Errorf("stage %d output: %w", o.Stage, err)
		}
		if r.Audio != nil {
			m.Audio = r.Audio
		}
		if r.Timestamps != nil {
			m.Timestamps = r.Timestamps
		}
		if r.Text != "" {
			m.Text = r.Text
		}
	}
	return &m, nil
}

// writeHandOff writes a non-final answer without copying its payload into
// a JSON buffer: the payload is URL-safe base64, which JSON never escapes,
// and it is by far the largest part of the answer.
func (s *Server) writeHandOff(w http.ResponseWriter, resp *RunResponse) {
	id, _ := json.Marshal(resp.RequestID)
	head := fmt.Appendf(nil, `{"request_id":%s,"stage_id":%d,"finished":false,"stage_input":"`, id, resp.StageID)
	const tail = "\"}\n"
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(head)+len(resp.StageInput)+len(tail)))
	w.WriteHeader(http.StatusOK)
	out := httpbody.NewWriter(w, s.opts.WriteTimeout)
	defer out.Done()
	// The payload is written in place: a Writer neither modifies nor keeps
	// what it is given (io.Writer), and io.WriteString would copy it, since
	// the response writers of middleware have no WriteString.
	input := unsafe.Slice(unsafe.StringData(resp.StageInput), len(resp.StageInput))
	for _, part := range [][]byte{head, input, []byte(tail)} {
		if _, err := out.Write(part); err != nil {
			return
		}
	}
}
