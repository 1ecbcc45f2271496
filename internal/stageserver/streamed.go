package stageserver

// The streamed form of POST /v1/run: the stage reads its input from the
// request's payload stream as it arrives, and its output goes out as a
// payload stream as the stage makes it.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/hop"
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
	body := newBodyReader(r.Body, rc, s.opts.BodyReadTimeout, s.opts.Limits)
	defer body.finish()
	br := bufio.NewReaderSize(body, streamReadBuffer)
	sr := s.codec.NewStreamReader(br)
	kind, env, err := sr.Header(nil)
	if err != nil {
		if body.abort() {
			// The rest of the body is not read, not even to keep the
			// connection: a caller that stalls could hold it so.
			w.Header().Set("Connection", "close")
		}
		return body.inputError(err)
	}
	c, err := s.checkStream(sr, kind, env)
	if err != nil {
		return refuse(w, r, rc, body, err)
	}
	r, end := s.traced(r, c, start, true)
	defer func() { end(err) }()
	// The hop ends when its input fails (its caller went away, or broke a
	// bound), even while its stage reads nothing of it.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// Big frames take their memory from the bodies' budget (the small
	// frames of audio never do).
	sr.SetBudget(r.Context(), s.bodies, "/v1/run frames")
	input := readFrames(sr, br, body, s.cfg.Deploy.StreamBuffer, peerGoneProbe(r), cancel)
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

// streamReadBuffer is the buffer a streamed body is read through: a
// frame of audio costs one read of the body or less.
const streamReadBuffer = 32 << 10

// runStreamed runs the call and answers with a payload stream: a hand-off
// to the next stage or the request's final output, sent frame by frame as
// the stage produces it. Errors after the headers end the stream with an
// error frame.
func (s *Server) runStreamed(w http.ResponseWriter, r *http.Request, c *call) error {
	var input *bodyReader
	if f, ok := c.input.(*frameSource); ok {
		input = f.body
	}
	r, unbound := s.bound(r, input)
	defer unbound()
	st, err := s.submit(r, c)
	if err != nil {
		return hopError(r, c, err)
	}
	defer st.Close()
	kind, head, err := s.streamHead(w.Header(), c)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	out := httpbody.NewWriter(w, s.opts.WriteTimeout)
	defer out.Done()
	// The headers go at once: a coordinator opens the next hop on them.
	if err := out.Flush(); err != nil {
		return nil
	}
	sw := s.codec.NewStreamWriter(out)
	err = sw.Header(kind, head)
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		s.streamFailed(r, c, err)
		return nil
	}
	s.pump(r, c, st, sw, out)
	return nil
}

// streamHead sets the headers of c's streamed answer and returns the
// header frame of its stream: a hand-off to the next stage, or the result
// of the final one. It sets nothing when it fails.
func (s *Server) streamHead(h http.Header, c *call) (payload.FrameKind, *payload.Envelope, error) {
	final := c.stage == c.sel.Final
	kind, to := payload.FrameResult, c.stage
	if !final {
		next, ok := c.sel.Next(c.stage)
		if !ok {
			return 0, nil, fmt.Errorf("hop: stage %d has no successor on the selection %v", c.stage, c.sel.Stages)
		}
		kind, to = payload.FrameHandOff, next
	}
	head := c.env.Next(to, nil, false)
	head.Carried = nil
	h.Set(hop.HeaderStage, strconv.Itoa(to))
	h.Set(hop.HeaderFinished, strconv.FormatBool(final))
	if c.sel.Returns(c.stage) {
		_, spec := s.cfg.StageSpec(c.stage, 0)
		h.Set(hop.HeaderOutput, string(spec.Output))
	}
	h.Set("Content-Type", hop.ContentType)
	h.Set(requestid.Header, c.env.RequestID)
	h.Set("X-Accel-Buffering", "no")
	return kind, head, nil
}

// pump writes the stage's outputs to sw as data frames, flushing whenever
// no further output waits, then the end frame. A failure is logged; when
// the stage failed, or a frame could not be made, an error frame ends the
// stream.
func (s *Server) pump(r *http.Request, c *call, st *orchestrator.Stream, sw *payload.StreamWriter, out *httpbody.Writer) {
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
			return
		}
		if err == nil {
			err = sw.Data(&o.Chunk)
		}
		if err == nil && st.Buffered() == 0 {
			// Frames of outputs already waiting go out together.
			err = out.Flush()
		}
		if err != nil {
			err = hopError(r, c, err)
			s.streamFailed(r, c, err)
			status, _, code := httperr.Classify(err)
			if sw.Fail(&payload.StreamError{Status: status, Code: code, Message: err.Error()}) == nil {
				_ = out.Flush()
			}
			return
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
