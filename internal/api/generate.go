package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req apijson.GenerateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := hop.RequestID(r, req.RequestID)
	if err == nil && (req.Input == nil || req.Input.Text == "") {
		err = httperr.BadRequest(`input is missing or empty: send "input": "text" or "input": {"text": "..."}`)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := s.orch.Submit(r.Context(), orchestrator.Request{
		ID: id, Prompt: engine.Prompt{Text: req.Input.Text}, Modalities: req.OutputModalities, Params: req.SamplingParams,
	})
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
	httpbody.WriteJSON(w, http.StatusOK, resp)
}

// eventWriter writes the events of a streamed answer, NDJSON or SSE, one
// flushed write per event.
type eventWriter struct {
	body *httpbody.Writer
	sse  bool
	buf  bytes.Buffer
}

func (e *eventWriter) send(v any) error {
	e.buf.Reset()
	if e.sse {
		e.buf.WriteString("data: ")
	}
	if err := json.NewEncoder(&e.buf).Encode(v); err != nil {
		return err
	}
	if e.sse {
		e.buf.WriteByte('\n')
	}
	return e.body.Send(e.buf.Bytes())
}

// startEvents writes the headers of an event stream.
func startEvents(w http.ResponseWriter, sse bool) {
	h := w.Header()
	if sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	// Tell buffering proxies (nginx) to pass each event on at once.
	h.Set("X-Accel-Buffering", "no")
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
	started := false
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			if !started {
				startEvents(w, ev.sse)
			}
			if err := ev.send(apijson.Event{Type: apijson.EventDone, RequestID: st.ID(), Stages: st.Timings()}); err != nil {
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
		if err == nil {
			out, err = apijson.RenderChunk(o.Chunk)
		}
		if err != nil {
			if !started {
				s.fail(w, r, err)
				return
			}
			s.streamFailed(r, err)
			_, typ, code := httperr.Classify(err)
			_ = ev.send(apijson.Event{Type: apijson.EventError, RequestID: st.ID(), Error: &apijson.ErrorDetail{Message: err.Error(), Type: typ, Code: code}})
			return
		}
		stage := o.Stage
		if err := ev.send(apijson.Event{Type: apijson.EventOutput, RequestID: st.ID(), Stage: &stage, Modality: string(o.Kind), Final: o.Final, Outputs: out}); err != nil {
			s.streamFailed(r, err)
			return
		}
	}
}

// streamFailed logs a failure after the response headers were sent: the
// stream then ends early.
func (s *Server) streamFailed(r *http.Request, err error) {
	_, _, code := httperr.Classify(err)
	level := slog.LevelWarn
	if code == string(orchestrator.CodeAborted) || r.Context().Err() != nil {
		level = slog.LevelInfo
	}
	s.log.LogAttrs(r.Context(), level, "stream ended early", slog.String("request_id", info(r).id), slog.String("code", code), slog.Any("err", err))
}
