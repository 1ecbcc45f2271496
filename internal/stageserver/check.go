package stageserver

// The checks of a /v1/run call before anything runs: the stage, the JSON
// request, the payload against the route, and the request id.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unsafe"

	"github.com/omnistage/omnistage/internal/api/imagein"
	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
)

// checkStage refuses a stage this server does not run.
func (s *Server) checkStage(stage int) error {
	if s.opts.Stage != nil && stage != *s.opts.Stage {
		n := *s.opts.Stage
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeWrongStage,
			"this server runs stage %d (%s) of pipeline %s, not stage %d; post to stage %d's server", n, s.cfg.StageName(n), s.cfg.Pipeline.Name, stage, stage)
	}
	if !s.cfg.Route.OnRoute(stage) {
		return httperr.BadRequest("stage %d is not on the route of pipeline %s (%s)", stage, s.cfg.Pipeline.Name, s.cfg.Route)
	}
	return nil
}

// expect is what a payload for stage must fit on this server.
func (s *Server) expect(stage int) payload.Expect {
	_, spec := s.cfg.StageSpec(stage, 0)
	return payload.Expect{Pipeline: s.cfg.Pipeline.Name, Digest: s.digest, Stage: stage, NumStages: s.cfg.Route.NumIDs(), Input: spec.Input}
}

// checkRoute checks a decoded payload for stage against the route: its
// outputs must be servable, its final stage theirs, and it must come from
// the stage's upstream on the request's route prefix. It returns the
// request's selection.
func (s *Server) checkRoute(stage int, env *payload.Envelope) (*pipeline.Selection, error) {
	sel, err := s.cfg.Route.Select(env.Outputs)
	if err != nil {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's output_modalities cannot be served: %v", err)}
	}
	if sel.Final != env.Final {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's final stage is %d, but its output_modalities end at stage %d", env.Final, sel.Final)}
	}
	up, ok := sel.Upstream(stage)
	if !ok {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload is for stage %d, which this request does not run (it runs %v)", stage, sel.Stages)}
	}
	if env.From != up {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload comes from stage %d, but stage %d takes its input from stage %d on this route", env.From, stage, up)}
	}
	return sel, nil
}

// parseRun checks a JSON /v1/run request against this server and decodes
// its input.
func (s *Server) parseRun(r *http.Request, body *runBody) (*call, error) {
	req := &body.req
	if req.StageID == nil {
		return nil, httperr.BadRequest(`stage_id is missing: name the stage to run (0 for a new request, or the stage_id of the previous /v1/run answer)`)
	}
	stage := *req.StageID
	if req.Finished != nil && *req.Finished {
		return nil, httperr.BadRequest("this answer is finished (finished: true): its output is the chain's result, and no stage takes it")
	}
	if err := s.checkStage(stage); err != nil {
		return nil, err
	}
	in := bytes.TrimSpace(req.StageInput)
	if len(in) == 0 || string(in) == "null" {
		if stage == hop.EntryStage {
			return nil, httperr.BadRequest(`stage_input is missing: stage %d takes a prompt object {"text": "..."}`, stage)
		}
		return nil, httperr.BadRequest("stage_input is missing: stage %d takes the stage_input string of the previous /v1/run answer", stage)
	}
	if stage == hop.EntryStage {
		return s.parseEntry(r, req, in)
	}
	if in[0] != '"' {
		return nil, httperr.BadRequest("stage %d takes the opaque stage_input string of the previous /v1/run answer, not a JSON %s: only stage %d takes a prompt object", stage, jsonKind(in[0]), hop.EntryStage)
	}
	if req.SamplingParams != nil || req.OutputModalities != nil {
		return nil, httperr.BadRequest("stage %d takes only stage_id and stage_input (and, from a previous answer posted back, its request_id and finished): sampling_params and output_modalities travel inside the payload", stage)
	}
	env, err := body.decode(s.codec, in, s.expect(stage))
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" && req.RequestID != env.RequestID {
		return nil, httperr.BadRequest("request_id %q is not the payload's (%q): post the previous answer back unchanged, or leave request_id out", quote.Short(req.RequestID), env.RequestID)
	}
	sel, err := s.checkRoute(stage, env)
	if err != nil {
		return nil, err
	}
	return &call{stage: stage, id: env.RequestID, env: env, sel: sel, input: engine.NewSliceSource(env.Data...)}, nil
}

// parseEntry checks a /v1/run request for the entry stage: a prompt and
// the request's description.
func (s *Server) parseEntry(r *http.Request, req *hop.RunRequest, in []byte) (*call, error) {
	if in[0] != '{' {
		return nil, httperr.BadRequest(`stage %d takes a prompt object {"text": "..."} as stage_input, not a JSON %s: opaque stage_input strings go to later stages`, hop.EntryStage, jsonKind(in[0]))
	}
	prompt := &hop.EntryInput{}
	if err := httperr.UnmarshalJSON(in, prompt); err != nil {
		return nil, httperr.BadRequest(`stage_input: %v; stage %d takes {"text": "..."} (or {"image": "<base64>"})`, err, hop.EntryStage)
	}
	input, err := s.entryInput(prompt)
	if err != nil {
		return nil, err
	}
	id, err := requestid.From(r, req.RequestID)
	if err != nil {
		return nil, err
	}
	route := s.cfg.Route
	sel, err := route.Select(req.OutputModalities)
	if err != nil {
		return nil, err
	}
	// Refuse bad params of later stages now, not hops later, where this
	// server can check them.
	if err := s.orch.CheckParams(sel, req.SamplingParams); err != nil {
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
		From: hop.EntryStage, To: hop.EntryStage, Final: sel.Final,
		Params: params, Prompt: engine.Prompt{Text: prompt.Text}, Outputs: outputs,
	}
	return &call{stage: hop.EntryStage, id: id, env: env, sel: sel, input: engine.NewSliceSource(input)}, nil
}

// entryInput returns the entry stage's input chunk for its stage_input: the
// text, or, for a pipeline that reads images, the image, checked. prompt's
// text is set to the text (vLLM-Omni's prompt field is its other name).
func (s *Server) entryInput(prompt *hop.EntryInput) (engine.Chunk, error) {
	if prompt.Prompt != nil {
		if prompt.Text != "" {
			return engine.Chunk{}, httperr.BadRequest(`stage_input has both text and prompt: send one of them`)
		}
		prompt.Text = *prompt.Prompt
	}
	name, kind := s.cfg.Pipeline.Name, s.cfg.Pipeline.Input
	switch {
	case kind == engine.KindImage && prompt.Text != "":
		return engine.Chunk{}, httperr.BadRequest(`pipeline %s reads an image: send stage_input {"image": "<base64>"}, not text`, name)
	case kind == engine.KindImage:
		if prompt.Image == "" {
			return engine.Chunk{}, httperr.BadRequest(`stage_input.image is empty: pipeline %s reads an image, sent as {"image": "<base64>"}`, name)
		}
		img, err := imagein.FromString("stage_input.image", prompt.Image)
		return engine.Chunk{Image: img}, err
	case prompt.Image != "":
		return engine.Chunk{}, httperr.BadRequest("pipeline %s takes %s, not an image", name, kind)
	case prompt.Text == "":
		return engine.Chunk{}, httperr.BadRequest("stage_input.text is empty: send the text to process")
	}
	return engine.Chunk{Text: &engine.Text{Text: prompt.Text}}, nil
}

// checkStream checks the header of a streamed call's request body, read
// and authenticated, against this server: a hand-off addressed to a stage
// this server runs, without carried outputs, from the stage's upstream on
// the request's route; or, for stage 0, from stage 0 itself with an empty
// prompt: a streamed request, whose text comes in the data frames as it
// arrives.
func (s *Server) checkStream(sr *payload.StreamReader, kind payload.FrameKind, env *payload.Envelope) (*call, error) {
	if kind != payload.FrameHandOff {
		return nil, badPayload("a /v1/run request stream starts with a hand-off header; this one starts with a result header")
	}
	stage := env.To
	if err := s.checkStage(stage); err != nil {
		return nil, err
	}
	if err := sr.Check(s.expect(stage)); err != nil {
		return nil, err
	}
	if len(env.Carried) > 0 {
		return nil, badPayload("a streamed payload carries no outputs: a coordinator keeps the outputs it sees pass (see the X-Omnistage-Output header)")
	}
	if stage == hop.EntryStage {
		return s.parseEntryStream(env)
	}
	sel, err := s.checkRoute(stage, env)
	if err != nil {
		return nil, err
	}
	return &call{stage: stage, id: env.RequestID, env: env, sel: sel}, nil
}

// parseEntryStream checks the header of a streamed request's stage 0
// call, whose input is the request's text as it arrives: its prompt is
// the feed of that text.
func (s *Server) parseEntryStream(env *payload.Envelope) (*call, error) {
	switch {
	case env.From != hop.EntryStage:
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload stream for stage %d comes from stage %d; stage %d takes the request's text, a stream from stage %d", hop.EntryStage, env.From, hop.EntryStage, hop.EntryStage)}
	case env.Prompt.Text != "":
		return nil, badPayload("a stage 0 stream carries the request's text in its data frames, as it arrives; its header's prompt text must be empty")
	}
	sel, err := s.cfg.Route.Select(env.Outputs)
	if err != nil {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's output_modalities cannot be served: %v", err)}
	}
	if sel.Final != env.Final {
		return nil, &payload.Error{Code: payload.CodeOutOfRange, Message: fmt.Sprintf("payload's final stage is %d, but its output_modalities end at stage %d", env.Final, sel.Final)}
	}
	env.Prompt.Feed = engine.NewFeed()
	return &call{stage: hop.EntryStage, id: env.RequestID, env: env, sel: sel}, nil
}

func badPayload(msg string) error {
	return &payload.Error{Code: payload.CodeUndecodable, Message: msg}
}

// rawString returns the JSON string in raw. A payload is URL-safe base64,
// which JSON never escapes, so the common case takes the bytes as they
// are, without a copy: the string lives no longer than the call, and the
// codec keeps nothing of it.
func rawString(raw []byte) (string, error) {
	if len(raw) > 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		return unsafe.String(&raw[1], len(raw)-2), nil
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
