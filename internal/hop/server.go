package hop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// entryStage is the stage every route starts at.
const entryStage = 0

// Defaults of ServerOptions.
const (
	DefaultBodyReadTimeout = 60 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
)

// ServerOptions configure a Server. The zero value serves every route
// stage with unsigned payloads and the defaults.
type ServerOptions struct {
	// Codec encodes and decodes payloads; nil means an unsigned codec with
	// the default size limit.
	Codec *payload.Codec
	// Stage, when set, makes a headless stage server's /v1/run: any other
	// stage is refused with wrong_stage.
	Stage *int
	// Logger gets the failures of answers already under way; nil discards.
	Logger *slog.Logger
	// MaxBody bounds a JSON body; 0 means the base64 length of the codec's
	// largest payload plus 1 MiB. A streamed body has no total bound (a
	// long request streams for long); each of its frames is bounded by the
	// codec's size limit.
	MaxBody int64
	// BodyReadTimeout bounds reading a JSON body, and the wait for each
	// frame of a streamed one.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds each write of an answer (one frame of a stream):
	// a caller that stops reading is cut off and the hop aborted.
	WriteTimeout time.Duration
	// TracerProvider, when set, traces each call (see trace.go).
	TracerProvider trace.TracerProvider
	// MaxBodyMemory bounds the bytes that the calls in progress hold at
	// once for their JSON bodies and for the stream frames longer than
	// payload.ReserveMin that they read; a call that cannot take its part
	// within BodyReadTimeout is refused as overloaded (503). 0 means
	// DefaultBodyMemoryFactor times MaxBody.
	MaxBodyMemory int64
}

// DefaultBodyMemoryFactor is how many of the largest JSON bodies the calls
// in progress may hold at once by default: with the default 32 MiB
// payloads, about 175 MiB of bodies, each costing about twice as much
// again as it is decoded.
const DefaultBodyMemoryFactor = 4

// Server answers POST /v1/run for one orchestrator: it runs exactly one
// stage per call, one-shot (JSON) or streamed, and renders the answer.
// The HTTP concerns around it (authentication, metrics, the route) are its
// caller's.
type Server struct {
	orch   *orchestrator.Orchestrator
	cfg    *pipeline.Config
	codec  *payload.Codec
	digest [32]byte
	opts   ServerOptions
	log    *slog.Logger
	tracer trace.Tracer      // nil when tracing is off
	bodies *membudget.Budget // of JSON bodies and big stream frames
}

// NewServer returns the /v1/run server of o.
func NewServer(o *orchestrator.Orchestrator, opts ServerOptions) (*Server, error) {
	cfg := o.Config()
	if opts.Stage != nil {
		if err := cfg.CheckServable(*opts.Stage); err != nil {
			return nil, fmt.Errorf("hop: %w", err)
		}
	}
	if opts.Codec == nil {
		opts.Codec = payload.NewCodec(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = int64(base64.RawURLEncoding.EncodedLen(opts.Codec.MaxSize()) + 1<<20)
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxBodyMemory <= 0 {
		opts.MaxBodyMemory = DefaultBodyMemoryFactor * opts.MaxBody
	}
	opts.MaxBodyMemory = max(opts.MaxBodyMemory, opts.MaxBody) // one body always fits
	srv := &Server{orch: o, cfg: cfg, codec: opts.Codec, digest: cfg.Digest(), opts: opts, log: opts.Logger,
		bodies: membudget.New(opts.MaxBodyMemory, opts.BodyReadTimeout)}
	if opts.TracerProvider != nil {
		srv.tracer = opts.TracerProvider.Tracer(telemetry.Name)
	}
	return srv, nil
}

// call is one checked /v1/run call: the stage to run on input, and the
// envelope it came in (for the entry stage, one made from the request, as
// if addressed to stage 0 by nobody).
type call struct {
	stage int
	id    string // the request id; "" to have one generated
	env   *payload.Envelope
	sel   *pipeline.Selection
	input engine.Source
}

// Serve answers one POST /v1/run. When it returns an error it has written
// nothing, and the caller answers with the error; once an answer is under
// way, Serve ends it itself (with an error frame, for a stream). Every
// problem with the request or its payload is a 4xx and nothing runs.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	if isStream(r.Header.Get("Content-Type")) {
		return s.serveStream(w, r, start)
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	release, err := s.reserveBody(r)
	if err != nil {
		return err
	}
	defer release()
	var req RunRequest
	done, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	c, err := s.parseRun(r, &req)
	done() // the call holds copies of what it needs from the body
	if err != nil {
		return err
	}
	streamed := c.stage == entryStage && acceptsStream(r)
	r, end := s.traced(r, c, start, streamed)
	if streamed {
		err = s.runStreamed(w, r, c)
	} else {
		err = s.runOneShot(w, r, c)
	}
	end(err)
	return err
}

// isStream reports whether a Content-Type is ContentType.
func isStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == ContentType
}

// acceptsStream reports whether the caller asks for a streamed answer.
func acceptsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if isStream(strings.TrimSpace(part)) {
				return true
			}
		}
	}
	return false
}

// submit starts the call's stage as a hop.
func (s *Server) submit(r *http.Request, c *call) (*orchestrator.Stream, error) {
	st, err := s.orch.Submit(r.Context(), orchestrator.Request{
		ID: c.id, Prompt: c.env.Prompt, Params: c.env.Params,
		Only: &orchestrator.StageCall{Stage: c.stage, Input: c.input},
	})
	if err != nil {
		return nil, err
	}
	if c.stage == entryStage {
		c.env.RequestID, c.env.TransferID = st.ID(), st.ID()
	}
	return st, nil
}

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
func (s *Server) parseRun(r *http.Request, req *RunRequest) (*call, error) {
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
		if stage == entryStage {
			return nil, httperr.BadRequest(`stage_input is missing: stage %d takes a prompt object {"text": "..."}`, stage)
		}
		return nil, httperr.BadRequest("stage_input is missing: stage %d takes the stage_input string of the previous /v1/run answer", stage)
	}
	if stage == entryStage {
		return s.parseEntry(r, req, in)
	}
	if in[0] != '"' {
		return nil, httperr.BadRequest("stage %d takes the opaque stage_input string of the previous /v1/run answer, not a JSON %s: only stage %d takes a prompt object", stage, jsonKind(in[0]), entryStage)
	}
	if req.SamplingParams != nil || req.OutputModalities != nil {
		return nil, httperr.BadRequest("stage %d takes only stage_id and stage_input (and, from a previous answer posted back, its request_id and finished): sampling_params and output_modalities travel inside the payload", stage)
	}
	str, err := rawString(in)
	if err != nil {
		return nil, httperr.BadRequest("stage_input: %v", err)
	}
	env, err := s.codec.Decode(str, s.expect(stage))
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" && req.RequestID != env.RequestID {
		return nil, httperr.BadRequest("request_id %q is not the payload's (%q): post the previous answer back unchanged, or leave request_id out", httperr.Short(req.RequestID), env.RequestID)
	}
	sel, err := s.checkRoute(stage, env)
	if err != nil {
		return nil, err
	}
	return &call{stage: stage, id: env.RequestID, env: env, sel: sel, input: engine.NewSliceSource(env.Data...)}, nil
}

// parseEntry checks a /v1/run request for the entry stage: a prompt and
// the request's description.
func (s *Server) parseEntry(r *http.Request, req *RunRequest, in []byte) (*call, error) {
	if in[0] != '{' {
		return nil, httperr.BadRequest(`stage %d takes a prompt object {"text": "..."} as stage_input, not a JSON %s: opaque stage_input strings go to later stages`, entryStage, jsonKind(in[0]))
	}
	var prompt Prompt
	if err := httperr.UnmarshalJSON(in, &prompt); err != nil {
		return nil, httperr.BadRequest(`stage_input: %v; stage %d takes {"text": "..."}`, err, entryStage)
	}
	if prompt.Text == "" {
		return nil, httperr.BadRequest("stage_input.text is empty: send the text to process")
	}
	id, err := RequestID(r, req.RequestID)
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
		From: entryStage, To: entryStage, Final: sel.Final,
		Params: params, Prompt: engine.Prompt{Text: prompt.Text}, Outputs: outputs,
	}
	return &call{stage: entryStage, id: id, env: env, sel: sel, input: engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: prompt.Text}})}, nil
}

// RequestID returns the caller's request id: the body's field or the
// X-Request-Id header ("" to have one generated). Both may be given only
// when they agree.
func RequestID(r *http.Request, body string) (string, error) {
	h := r.Header.Get("X-Request-Id")
	switch {
	case body == "":
		return h, nil
	case h != "" && h != body:
		return "", httperr.BadRequest("request_id %q and header X-Request-Id %q differ; send one of them", body, h)
	}
	return body, nil
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

// bodyReader reads a streamed request body with a deadline on each read.
// abort cuts a read under way and refuses the next ones, unless the body
// was read to its end: over HTTP/1.1 the deadline is the connection's,
// and once the body has ended the server reads the connection itself (to
// notice a client that goes away, and the next request), which a deadline
// in the past would make fail.
type bodyReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration

	mu      sync.Mutex
	stopped bool
	ended   bool // a read returned io.EOF
}

var errBodyStopped = errors.New("hop: request body no longer read")

// Read implements io.Reader. The deadline bounds this read only: over
// HTTP/2 a deadline is a timer that resets the stream when it fires,
// whether or not a read is under way, and the stage may take long between
// two reads.
func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return 0, errBodyStopped
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	b.mu.Unlock()
	n, err := b.r.Read(p)
	b.mu.Lock()
	if !b.stopped {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	b.ended = b.ended || errors.Is(err, io.EOF)
	b.mu.Unlock()
	return n, err
}

// abort cuts a read under way and refuses the next ones, if the body has
// not ended. It reports whether the body was left unread: it had not
// ended.
func (b *bodyReader) abort() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped && !b.ended {
		b.stopped = true
		_ = b.rc.SetReadDeadline(time.Now())
	}
	return !b.ended
}

// finish refuses the next reads; the hop is over.
func (b *bodyReader) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
}

// frameSource is a streamed hop's input: the data frames of its request
// body, read ahead of the stage, at most its capacity, by a goroutine of
// its own. So the hop notices a caller that goes away while its stage
// reads nothing (HTTP/1.1 tells a handler so only through its reads), and
// a stage's Recv ends with its ctx.
type frameSource struct {
	frames chan engine.Chunk
	done   chan struct{} // closed when the reader returned
	stop   chan struct{} // closed to stop the reader
	body   *bodyReader
	err    error // why the frames ended; written before frames closes

	closeOnce sync.Once
	unread    bool // close left the body unread
}

// readFrames starts reading sr's data frames into a frameSource holding
// up to n. When the body fails (not a bad payload, nor a frame refused for
// want of memory: the connection), gone is called with the cause.
func readFrames(sr *payload.StreamReader, body *bodyReader, n int, gone func(error)) *frameSource {
	f := &frameSource{frames: make(chan engine.Chunk, n), done: make(chan struct{}), stop: make(chan struct{}), body: body}
	go func() {
		defer close(f.done)
		for {
			c, err := sr.Next()
			if err != nil {
				var pe *payload.Error
				var busy *membudget.BusyError
				if !errors.Is(err, io.EOF) && !errors.As(err, &busy) && (!errors.As(err, &pe) || pe.Code == payload.CodeTruncated) {
					gone(err)
				}
				f.err = err
				close(f.frames)
				return
			}
			select {
			case f.frames <- c:
			case <-f.stop:
				return
			}
		}
	}()
	return f
}

// Recv implements engine.Source.
func (f *frameSource) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-f.frames:
		if !ok {
			return engine.Chunk{}, f.err
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// close stops the reader, cutting a read under way if the body has not
// ended, and waits for it. It reports whether the body was left unread;
// a second call reports what the first did.
func (f *frameSource) close() bool {
	f.closeOnce.Do(func() {
		close(f.stop)
		f.unread = f.body.abort()
		<-f.done
	})
	return f.unread
}

// reserveBody takes the memory a JSON body may need from the server's
// budget (ServerOptions.MaxBodyMemory) before it is read: its declared
// length, or MaxBody when it declares none. Until its call returns, the
// body, its decoded payload and the stage's input are in memory, so the
// reservation lasts that long. A call that cannot reserve its part within
// the body read timeout is refused as overloaded (503, retryable): a
// burst of big bodies, signed or forged, costs at most the budget, and
// each body is read, base64-decoded and its signature checked before any
// more of it is copied.
func (s *Server) reserveBody(r *http.Request) (release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > s.opts.MaxBody {
		n = s.opts.MaxBody // a longer body is refused as it is read
	}
	return s.bodies.Take(r.Context(), max(n, 1), "/v1/run bodies")
}
