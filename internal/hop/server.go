package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/wire"
)

// entryStage is the stage every route starts at.
const entryStage = 0

// runCall is one checked /v1/run call: the stage to run on input, and the
// envelope it came in (for the entry stage, one made from the request, as
// if addressed to stage 0 by nobody).
type runCall struct {
	stage int
	id    string // the request id; "" to have one generated
	env   *payload.Envelope
	sel   *pipeline.Selection
	input []engine.Chunk
}

// run runs exactly one stage and answers with the payload for the next
// stage, or with the request's selected outputs when the stage is its
// final one. Every problem with the request or its payload is a 4xx and
// nothing runs.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	var req wire.RunRequest
	if err := s.readRun(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	call, err := s.parseRun(r, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := s.orch.Submit(r.Context(), orchestrator.Request{
		ID: call.id, Prompt: call.env.Prompt, Params: call.env.Params,
		Only: &orchestrator.StageCall{Stage: call.stage, Input: call.input},
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	if call.stage == entryStage {
		call.env.RequestID, call.env.TransferID = st.ID(), st.ID()
	}
	outs, err := collect(r.Context(), st)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := s.answer(call, outs[0].Chunks)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if resp.Finished {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	s.writeHandOff(w, resp)
}

// writeHandOff writes a non-final answer without copying its payload into
// a JSON buffer: the payload is URL-safe base64, which JSON never escapes,
// and it is by far the largest part of the answer.
func (s *Server) writeHandOff(w http.ResponseWriter, resp *wire.RunResponse) {
	id, _ := json.Marshal(resp.RequestID)
	head := fmt.Appendf(nil, `{"request_id":%s,"stage_id":%d,"finished":false,"stage_input":"`, id, resp.StageID)
	const tail = "\"}\n"
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(head)+len(resp.StageInput)+len(tail)))
	w.WriteHeader(http.StatusOK)
	body := s.newBodyWriter(w)
	defer body.done()
	for _, part := range []string{string(head), resp.StageInput, tail} {
		if _, err := io.WriteString(body, part); err != nil {
			return
		}
	}
}

// answer builds the /v1/run answer from the stage's output.
func (s *Server) answer(call *runCall, data []engine.Chunk) (*wire.RunResponse, error) {
	env := call.env
	// The incoming data is the output of env.From; it travels on when the
	// request selected it.
	keep := env.From != call.stage && call.sel.Returns(env.From)
	if call.stage == call.sel.Final {
		_, spec := s.cfg.StageSpec(call.stage, 0)
		outs := append(env.Carry(keep), payload.Output{Stage: call.stage, Kind: spec.Output, Chunks: data})
		out, err := merge(outs)
		if err != nil {
			return nil, err
		}
		return &wire.RunResponse{RequestID: env.RequestID, StageID: call.stage, Finished: true, Output: out}, nil
	}
	next, ok := call.sel.Next(call.stage)
	if !ok {
		return nil, fmt.Errorf("run: stage %d has no successor on the selection %v", call.stage, call.sel.Stages)
	}
	enc, err := s.codec.Encode(env.Next(next, data, keep))
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return &wire.RunResponse{RequestID: env.RequestID, StageID: next, StageInput: enc}, nil
}

// parseRun checks a /v1/run request against this server and decodes its
// input.
func (s *Server) parseRun(r *http.Request, req *wire.RunRequest) (*runCall, error) {
	if req.StageID == nil {
		return nil, badRequest(`stage_id is missing: name the stage to run (0 for a new request, or the stage_id of the previous /v1/run answer)`)
	}
	stage := *req.StageID
	if s.opts.Stage != nil && stage != *s.opts.Stage {
		n := *s.opts.Stage
		return nil, httperr.Errorf(http.StatusBadRequest, httperr.CodeWrongStage,
			"this server runs stage %d (%s) of pipeline %s, not stage %d; post to stage %d's server", n, s.cfg.StageName(n), s.cfg.Pipeline.Name, stage, stage)
	}
	route := s.cfg.Route
	if !route.OnRoute(stage) {
		return nil, badRequest("stage %d is not on the route of pipeline %s (%s)", stage, s.cfg.Pipeline.Name, route)
	}
	in := bytes.TrimSpace(req.StageInput)
	if len(in) == 0 || string(in) == "null" {
		if stage == entryStage {
			return nil, badRequest(`stage_input is missing: stage %d takes a prompt object {"text": "..."}`, stage)
		}
		return nil, badRequest("stage_input is missing: stage %d takes the stage_input string of the previous /v1/run answer", stage)
	}
	if stage == entryStage {
		return s.parseEntry(r, req, in)
	}
	if in[0] != '"' {
		return nil, badRequest("stage %d takes the opaque stage_input string of the previous /v1/run answer, not a JSON %s: only stage %d takes a prompt object", stage, jsonKind(in[0]), entryStage)
	}
	if req.SamplingParams != nil || req.RequestID != "" || req.OutputModalities != nil {
		return nil, badRequest("stage %d takes only stage_id and stage_input: sampling_params, request_id and output_modalities travel inside the payload", stage)
	}
	str, err := rawString(in)
	if err != nil {
		return nil, badRequest("stage_input: %v", err)
	}
	_, spec := s.cfg.StageSpec(stage, 0)
	env, err := s.codec.Decode(str, payload.Expect{
		Pipeline: s.cfg.Pipeline.Name, Digest: s.digest, Stage: stage, NumStages: route.NumIDs(), Input: spec.Input,
	})
	if err != nil {
		return nil, err
	}
	sel, err := route.Select(env.Outputs)
	if err != nil {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's output_modalities cannot be served: %v", err)}
	}
	if sel.Final != env.Final {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's final stage is %d, but its output_modalities end at stage %d", env.Final, sel.Final)}
	}
	up := -1
	for i, id := range sel.Stages {
		if id == stage && i > 0 {
			up = sel.Stages[i-1]
		}
	}
	if up < 0 {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload is for stage %d, which this request does not run (it runs %v)", stage, sel.Stages)}
	}
	if env.From != up {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload comes from stage %d, but stage %d takes its input from stage %d on this route", env.From, stage, up)}
	}
	return &runCall{stage: stage, id: env.RequestID, env: env, sel: sel, input: env.Data}, nil
}

// parseEntry checks a /v1/run request for the entry stage: a prompt and
// the request's description.
func (s *Server) parseEntry(r *http.Request, req *wire.RunRequest, in []byte) (*runCall, error) {
	if in[0] != '{' {
		return nil, badRequest(`stage %d takes a prompt object {"text": "..."} as stage_input, not a JSON %s: opaque stage_input strings go to later stages`, entryStage, jsonKind(in[0]))
	}
	var prompt wire.Prompt
	if err := unmarshalStrict(in, &prompt); err != nil {
		return nil, badRequest(`stage_input: %v; stage %d takes {"text": "..."}`, err, entryStage)
	}
	if prompt.Text == "" {
		return nil, badRequest("stage_input.text is empty: send the text to process")
	}
	id, err := requestID(r, req.RequestID)
	if err != nil {
		return nil, err
	}
	if err := checkModalities(req.OutputModalities); err != nil {
		return nil, err
	}
	if err := checkParams(req.SamplingParams); err != nil {
		return nil, err
	}
	route := s.cfg.Route
	sel, err := route.Select(req.OutputModalities)
	if err != nil {
		return nil, err
	}
	if err := sel.CheckParams(len(req.SamplingParams)); err != nil {
		return nil, err
	}
	// Refuse bad params of later stages now, not hops later, where this
	// server can check them.
	if err := s.orch.CheckParams(sel.Stages, req.SamplingParams); err != nil {
		return nil, err
	}
	params := make([]json.RawMessage, route.NumIDs())
	copy(params, req.SamplingParams)
	outputs := make([]string, len(sel.Outputs))
	for i, o := range sel.Outputs {
		outputs[i] = string(o.Kind)
	}
	env := &payload.Envelope{
		Pipeline: s.cfg.Pipeline.Name, Digest: s.digest,
		From: entryStage, To: entryStage, Final: sel.Final,
		Params: params, Prompt: engine.Prompt{Text: prompt.Text}, Outputs: outputs,
	}
	return &runCall{stage: entryStage, id: id, env: env, sel: sel, input: []engine.Chunk{{Text: &engine.Text{Text: prompt.Text}}}}, nil
}

// rawString returns the JSON string in raw. A payload is URL-safe base64,
// which JSON never escapes, so the common case takes the bytes as they are.
func rawString(raw []byte) (string, error) {
	if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func jsonKind(first byte) string {
	switch first {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}
