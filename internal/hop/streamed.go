package hop

// The streamed form of POST /v1/run: the stage reads its input from the
// request's payload stream as it arrives, and its output goes out as a
// payload stream as the stage makes it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// serveStream answers a call whose body is a payload stream: a hand-off
// header addressed to the stage to run, then its input as it is produced.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, start time.Time) (err error) {
	rc := http.NewResponseController(w)
	// Over HTTP/1.1 the body is read while the answer is written.
	if err := rc.EnableFullDuplex(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	body := &bodyReader{r: r.Body, rc: rc, idle: s.opts.BodyReadTimeout}
	defer body.finish()
	sr := s.codec.NewStreamReader(body)
	kind, env, err := sr.Header(nil)
	if err != nil {
		return err
	}
	if kind != payload.FrameHandOff {
		return badPayload("a /v1/run request stream starts with a hand-off header; this one starts with a result header")
	}
	stage := env.To
	if err := s.checkStage(stage); err != nil {
		return err
	}
	if err := sr.Check(s.expect(stage)); err != nil {
		return err
	}
	if len(env.Carried) > 0 {
		return badPayload("a streamed payload carries no outputs: a coordinator keeps the outputs it sees pass (see the X-Omnistage-Output header)")
	}
	sel, err := s.checkRoute(stage, env)
	if err != nil {
		return err
	}
	c := &call{stage: stage, id: env.RequestID, env: env, sel: sel}
	r, end := s.traced(r, c, start, true)
	defer func() { end(err) }()
	// The hop ends when its caller goes away, even while its stage reads
	// nothing of its input.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// Big frames take their memory from the bodies' budget (the small
	// frames of audio never do).
	sr.SetBudget(r.Context(), s.bodies, "/v1/run frames")
	input := readFrames(sr, body, s.cfg.Deploy.StreamBuffer, func(err error) {
		cancel(fmt.Errorf("the caller went away: %w", err))
	})
	defer sr.Release() // after input.close: the reader has stopped
	defer input.close()
	c.input = input
	err = s.runStreamed(w, r.WithContext(ctx), c)
	if input.close() {
		// The rest of the body was left unread (the stage failed): the
		// connection must not carry another request, whose start would be
		// read from the middle of this body.
		if err != nil {
			w.Header().Set("Connection", "close") // with the error answer
			return err
		}
		panic(http.ErrAbortHandler) // after the answer: cut the connection
	}
	return err
}

// runStreamed runs the call and answers with a payload stream: a hand-off
// to the next stage or the request's final output, sent frame by frame as
// the stage produces it. Errors after the headers end the stream with an
// error frame.
func (s *Server) runStreamed(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.submit(r, c)
	if err != nil {
		return err
	}
	defer st.Close()
	_, spec := s.cfg.StageSpec(c.stage, 0)
	final := c.stage == c.sel.Final
	var head *payload.Envelope
	kind := payload.FrameResult
	h := w.Header()
	if final {
		head = c.env.Next(c.stage, nil, false)
		h.Set(HeaderStage, strconv.Itoa(c.stage))
	} else {
		next, ok := c.sel.Next(c.stage)
		if !ok {
			return fmt.Errorf("hop: stage %d has no successor on the selection %v", c.stage, c.sel.Stages)
		}
		head, kind = c.env.Next(next, nil, false), payload.FrameHandOff
		h.Set(HeaderStage, strconv.Itoa(next))
	}
	head.Carried = nil
	h.Set(HeaderFinished, strconv.FormatBool(final))
	if c.sel.Returns(c.stage) {
		h.Set(HeaderOutput, string(spec.Output))
	}
	h.Set("Content-Type", ContentType)
	h.Set("X-Request-Id", c.env.RequestID)
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := httpbody.NewWriter(w, s.opts.WriteTimeout)
	defer out.Done()
	// The headers go at once: a coordinator opens the next hop on them.
	if err := out.Flush(); err != nil {
		return nil
	}
	sw := s.codec.NewStreamWriter(out)
	if err := sw.Header(kind, head); err != nil {
		s.streamFailed(r, c, err)
		return nil
	}
	if err := out.Flush(); err != nil {
		s.streamFailed(r, c, err)
		return nil
	}
	for {
		o, err := st.Recv(r.Context())
		if errors.Is(err, io.EOF) {
			err = sw.End()
			if err == nil {
				err = out.Flush()
			}
			if err != nil {
				s.streamFailed(r, c, err)
			}
			return nil
		}
		if err == nil {
			err = sw.Data(&o.Chunk)
		}
		if err == nil && st.Buffered() == 0 {
			// Frames of outputs already waiting go out together.
			err = out.Flush()
		}
		if err != nil {
			s.streamFailed(r, c, err)
			status, _, code := httperr.Classify(err)
			if sw.Fail(&payload.StreamError{Status: status, Code: code, Message: err.Error()}) == nil {
				_ = out.Flush()
			}
			return nil
		}
	}
}

// streamFailed logs a failure after the answer's headers were sent.
func (s *Server) streamFailed(r *http.Request, c *call, err error) {
	spanFailed(r.Context(), err)
	_, _, code := httperr.Classify(err)
	level := slog.LevelWarn
	if code == string(orchestrator.CodeAborted) || r.Context().Err() != nil {
		level = slog.LevelInfo
	}
	s.log.LogAttrs(r.Context(), level, "hop ended early", slog.String("request_id", c.env.RequestID),
		slog.Int("stage", c.stage), slog.String("code", code), slog.Any("err", err))
}
