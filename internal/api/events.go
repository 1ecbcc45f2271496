package api

// What the streamed answers share: the headers and framing of event
// streams (NDJSON and server-sent events), the in-band error, and the log
// line of a stream that ends early.

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// setEventHeaders sets the headers of an event stream: server-sent events,
// or NDJSON when sse is false.
func setEventHeaders(h http.Header, sse bool) {
	if sse {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	// Tell buffering proxies (nginx) to pass each event on at once.
	h.Set("X-Accel-Buffering", "no")
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

// errorDetail is err as the error of an in-band error event.
func errorDetail(err error) *apijson.ErrorDetail {
	_, typ, code := httperr.Classify(err)
	return &apijson.ErrorDetail{Message: err.Error(), Type: typ, Code: code}
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
