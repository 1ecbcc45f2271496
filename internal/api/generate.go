package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/wire"
)

// requestID returns the caller's request id: the body's field or the
// X-Request-Id header ("" to have one generated). Both may be given only
// when they agree.
func requestID(r *http.Request, body string) (string, error) {
	h := r.Header.Get("X-Request-Id")
	switch {
	case body == "":
		return h, nil
	case h != "" && h != body:
		return "", badRequest("request_id %q and header X-Request-Id %q differ; send one of them", body, h)
	}
	return body, nil
}

func badRequest(format string, args ...any) error {
	return httperr.Errorf(http.StatusBadRequest, string(orchestrator.CodeBadRequest), format, args...)
}

// checkParams refuses sampling_params entries that are not JSON objects or
// null, before any engine sees them.
func checkParams(params []json.RawMessage) error {
	for i, p := range params {
		p = bytes.TrimSpace(p)
		if len(p) == 0 || string(p) == "null" {
			continue
		}
		if p[0] != '{' {
			return badRequest("sampling_params[%d] must be a JSON object or null (the params of stage %d)", i, i)
		}
	}
	return nil
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req wire.GenerateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := requestID(r, req.RequestID)
	if err == nil && (req.Input == nil || req.Input.Text == "") {
		err = badRequest(`input is missing or empty: send "input": "text" or "input": {"text": "..."}`)
	}
	if err == nil {
		err = checkModalities(req.OutputModalities)
	}
	if err == nil {
		err = checkParams(req.SamplingParams)
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
	if req.Stream == wire.StreamOff {
		s.generateWhole(w, r, st)
		return
	}
	s.generateStream(w, r, st, req.Stream)
}

// generateWhole answers with every selected output once the request ends.
func (s *Server) generateWhole(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream) {
	outs, err := collect(r.Context(), st)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := wire.GenerateResponse{RequestID: st.ID(), Outputs: make([]wire.GenerateOutput, 0, len(outs))}
	final := st.Selection().Final
	for _, o := range outs {
		rendered, err := render(o)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		resp.Outputs = append(resp.Outputs, wire.GenerateOutput{Stage: o.Stage, Modality: string(o.Kind), Finished: o.Stage == final, Output: rendered})
	}
	writeJSON(w, http.StatusOK, resp)
}

// eventWriter writes the events of a streamed answer, NDJSON or SSE, one
// flushed write per event.
type eventWriter struct {
	body *bodyWriter
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
	return e.body.send(e.buf.Bytes())
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
func (s *Server) generateStream(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream, mode wire.StreamMode) {
	ctx := r.Context()
	body := s.newBodyWriter(w)
	defer body.done()
	ev := &eventWriter{body: body, sse: mode == wire.StreamSSE}
	started := false
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			if !started {
				startEvents(w, ev.sse)
			}
			if err := ev.send(wire.Event{Type: wire.EventDone, RequestID: st.ID()}); err != nil {
				s.streamFailed(r, err)
			}
			return
		}
		if err == nil && !started {
			startEvents(w, ev.sse)
			started = true
		}
		var out wire.Output
		if err == nil {
			out, err = chunkOutput(o.Chunk)
		}
		if err != nil {
			if !started {
				s.fail(w, r, err)
				return
			}
			s.streamFailed(r, err)
			_, typ, code := httperr.Classify(err)
			_ = ev.send(wire.Event{Type: wire.EventError, RequestID: st.ID(), Error: &wire.ErrorDetail{Message: err.Error(), Type: typ, Code: code}})
			return
		}
		stage := o.Stage
		if err := ev.send(wire.Event{Type: wire.EventOutput, RequestID: st.ID(), Stage: &stage, Modality: string(o.Kind), Final: o.Final, Output: out}); err != nil {
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
