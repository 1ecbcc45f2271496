package api

// POST /v1/generate: the native endpoint, whole or streamed.

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/omnistage/omnistage/internal/api/imagein"
	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	req, image, err := s.readGenerate(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.model(req.Model, false)
	var id string
	if err == nil {
		id, err = requestid.From(r, req.RequestID)
	}
	oreq := orchestrator.Request{Modalities: req.OutputModalities, Params: req.SamplingParams}
	switch {
	case err != nil:
	case image != nil:
		oreq.Image = image
	case req.Input == nil || req.Input.Text == "":
		err = httperr.BadRequest(`input is missing or empty: send "input": "text", "input": {"text": "..."}, or, to a pipeline that reads images, "input": {"image": "<base64>"} or a multipart form with the image as its file field`)
	case int64(len(req.Input.Text)) > s.opts.MaxBody:
		err = httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeBodyTooLarge, "input text of %d bytes is longer than this endpoint's limit of %d bytes for text", len(req.Input.Text), s.opts.MaxBody)
	default:
		oreq.Prompt = engine.Prompt{Text: req.Input.Text}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	oreq.ID = id
	st, err := p.orch.Submit(r.Context(), oreq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	if req.Stream == apijson.StreamOff {
		s.generateWhole(w, r, st)
		return
	}
	s.generateStream(w, r, st, req.Stream)
}

// readGenerate reads a POST /v1/generate body: JSON, or a multipart form
// with an image; the image, checked, when the request carries one.
func (s *Server) readGenerate(w http.ResponseWriter, r *http.Request) (apijson.GenerateRequest, *engine.Image, error) {
	var req apijson.GenerateRequest
	if isMultipart(r) {
		var image []byte
		err := s.readingBody(w, func() (err error) {
			req, image, err = readGenerateForm(r)
			return err
		})
		if err != nil {
			return req, nil, err
		}
		img, err := imagein.Check(image)
		return req, img, err
	}
	if err := s.decodeJSON(w, r, &req); err != nil {
		return req, nil, err
	}
	if req.Input == nil || req.Input.Image == "" {
		return req, nil, nil
	}
	img, err := imagein.FromString("input.image", req.Input.Image)
	if err != nil {
		return req, nil, err
	}
	return req, img, nil
}

// generateWhole answers with every selected output once the request ends.
func (s *Server) generateWhole(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream) {
	outs, err := st.Collect(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := apijson.GenerateResponse{RequestID: st.ID(), Outputs: make([]apijson.GenerateOutput, 0, len(outs))}
	for _, o := range outs {
		rendered, err := apijson.Render(o.Kind, o.Chunks)
		if err != nil {
			s.fail(w, r, fmt.Errorf("stage %d output: %w", o.Stage, err))
			return
		}
		resp.Outputs = append(resp.Outputs, apijson.GenerateOutput{Stage: o.Stage, Modality: string(o.Kind), Finished: o.Final, Outputs: rendered})
	}
	resp.Notes = notesOf(st)
	httpbody.WriteJSON(w, http.StatusOK, resp)
}

// startEvents writes the headers of an event stream.
func startEvents(w http.ResponseWriter, sse bool) {
	setEventHeaders(w.Header(), sse)
	w.WriteHeader(http.StatusOK)
}

// generateStream sends each output chunk as an event as it comes, then a
// done event. The headers wait for the first output, so a request that
// fails before producing anything gets a plain error status; a failure
// after that is logged and ends the stream with an error event.
func (s *Server) generateStream(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream, mode apijson.StreamMode) {
	ctx := r.Context()
	body := s.newBodyWriter(w)
	defer body.Done()
	ev := &eventWriter{body: body, sse: mode == apijson.StreamSSE}
	var regions regionEvents
	started := false
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			if !started {
				startEvents(w, ev.sse)
			}
			if err := ev.send(apijson.Event{Type: apijson.EventDone, RequestID: st.ID(), Stages: stageTimings(st), Notes: notesOf(st)}); err != nil {
				s.streamFailed(r, err)
			}
			return
		}
		if err == nil && o.Chunk.Audio != nil && len(o.Chunk.Audio.Samples) == 0 {
			continue // a sentence's end mark: no audio to send
		}
		if err == nil && !started {
			startEvents(w, ev.sse)
			started = true
		}
		var out apijson.Outputs
		modality := string(o.Kind)
		switch {
		case err != nil:
		case o.Chunk.Regions != nil:
			out, modality = regions.render(st, o)
		default:
			out, err = apijson.RenderChunk(o.Chunk)
		}
		if err != nil {
			if !started {
				s.fail(w, r, err)
				return
			}
			s.streamFailed(r, err)
			_ = ev.send(apijson.Event{Type: apijson.EventError, RequestID: st.ID(), Error: errorDetail(err)})
			return
		}
		stage := o.Stage
		if err := ev.send(apijson.Event{Type: apijson.EventOutput, RequestID: st.ID(), Stage: &stage, Modality: modality, Final: o.Final, Outputs: out}); err != nil {
			s.streamFailed(r, err)
			return
		}
	}
}

// notesOf renders the notes of the ended request st.
func notesOf(st *orchestrator.Stream) []apijson.Note {
	var out []apijson.Note
	for _, n := range st.Notes() {
		out = append(out, apijson.Note(n))
	}
	return out
}

// stageTimings renders the timeline of the ended request st.
func stageTimings(st *orchestrator.Stream) []apijson.StageTiming {
	tl := st.Timings()
	if tl == nil {
		return nil
	}
	out := make([]apijson.StageTiming, len(tl))
	for i, t := range tl {
		out[i] = apijson.StageTiming(t)
	}
	return out
}

// regionEvents renders a stream's regions chunks as events: the regions,
// with their places in the text read so far, when the request selected
// regions (modality regions), and the text they add when it selected text
// (modality text, when it did not select regions too).
type regionEvents struct {
	rr apijson.RegionsRenderer
}

func (e *regionEvents) render(st *orchestrator.Stream, o orchestrator.OutputChunk) (apijson.Outputs, string) {
	regions, text := e.rr.Chunk(o.Chunk.Regions)
	var out apijson.Outputs
	modality := ""
	for _, sel := range st.Selection().Outputs {
		if sel.Stage != o.Stage {
			continue
		}
		switch sel.Kind {
		case engine.KindRegions:
			out.Regions, modality = regions, string(engine.KindRegions)
		case engine.KindText:
			out.Text = text
			if modality == "" {
				modality = string(engine.KindText)
			}
		}
	}
	if out.Regions == nil && modality == string(engine.KindRegions) {
		out.Regions = []apijson.Region{}
	}
	return out, modality
}
