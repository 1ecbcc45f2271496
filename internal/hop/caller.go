package hop

// Caller, the client side of one remote stage: it runs one stage of a
// pipeline on stage servers for a server that runs the rest itself.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// Caller runs one stage of a pipeline on stage servers, for a server that
// runs the rest of the pipeline itself (a stage with placement remote or
// process): each Call streams a request's input to a stage server as the
// upstream stage produces it and hands the stage's output on as it comes
// back.
//
// For stage 0 of a request that enters whole, the call is the ordinary
// first call of a request: the prompt object, the sampling_params array
// and output_modalities, in JSON. For a later stage, and for stage 0 of a
// streamed request (its text arrives while it runs: Prompt.Feed), the
// Caller writes its input as a payload stream, exactly as the upstream
// stage's server would have: this process's pipeline name and digest,
// From the stage's upstream on the route (stage 0 itself for stage 0, whose
// input is the request's text), To the stage, the request's prompt (empty
// for a streamed request, whose text comes in the data frames as it
// arrives), and a sampling_params array with one entry per stage id in
// which only this stage's entry is set. Both forms name as
// output_modalities the output of the route's last stage, so the server
// runs the stage and answers, unless the stage ends the route, with a
// hand-off to the next stage whose data is exactly the stage's output;
// when it ends the route, with a result stream of that output. Streams are
// signed and checked with the Caller's codec, which must hold the stage
// servers' key.
type Caller struct {
	client *Client
	codec  *payload.Codec
	stage  int
	name   string
	input  engine.Kind

	pipeline string
	digest   [32]byte
	numIDs   int
	upstream int      // the stage feeding this one; -1 for stage 0
	outputs  []string // output_modalities of every call
	finalID  int      // the stage those outputs end at
	ends     bool     // the stage ends the route: its answer is a result
	next     int      // the stage a hand-off answer is for, when !ends
	nextIn   engine.Kind
	output   engine.Kind
}

// NewCaller returns the Caller of stage id of cfg, which must be on the
// route, calling through client and signing with codec.
func NewCaller(cfg *pipeline.Config, id int, client *Client, codec *payload.Codec) (*Caller, error) {
	route := cfg.Route
	if !route.OnRoute(id) {
		return nil, fmt.Errorf("hop: stage %d is not on the route (%s)", id, route)
	}
	chain := route.Chain()
	_, last := cfg.StageSpec(chain[len(chain)-1], 0)
	_, spec := cfg.StageSpec(id, 0)
	c := &Caller{
		client: client, codec: codec, stage: id, name: spec.Name, input: spec.Input, output: spec.Output,
		pipeline: cfg.Pipeline.Name, digest: cfg.Digest(), numIDs: route.NumIDs(), upstream: -1,
		outputs: []string{string(last.Output)},
	}
	sel, err := route.Select(c.outputs)
	if err != nil {
		return nil, err
	}
	c.finalID = sel.Final
	if up, ok := sel.Upstream(id); ok {
		c.upstream = up
	}
	if next, ok := sel.Next(id); ok {
		_, ns := cfg.StageSpec(next, 0)
		c.next, c.nextIn = next, ns.Input
		return c, nil
	}
	c.ends = true
	return c, nil
}

// Call runs job's stage on the stage server at base: it reads job.In as
// it comes and sends the stage's output to job.Out as it comes back. It
// returns nil when the whole output has been sent. Errors: a
// *TransportError when the call broke off (no answer, or a stream cut
// short), an *HTTPError when the server refused the call or its stage
// failed (an error status, or an error frame), ctx's error when ctx ended,
// and other errors for answers that do not fit the pipeline.
func (c *Caller) Call(ctx context.Context, base string, job *engine.Job) error {
	body, contentType := c.request(ctx, job)
	answered, err := c.call(ctx, base, job, body, contentType)
	// The server may end its answer without reading all the input (its
	// stage failed, or did not need the rest): stop the writer.
	werr := body.Close()
	var te *TransportError
	switch {
	case err == nil:
		return nil
	case body.inputErr() != nil:
		// The input could not be read: that is the call's error, the
		// transport only saw a body that failed.
		return body.inputErr()
	case !answered && !body.taken() && errors.As(err, &te):
		te.Unsent = true
	}
	// When the writer could not encode the input, that is the call's
	// error: the transport only saw a body cut short.
	var ie *engine.InputError
	if werr != nil && errors.As(werr, &ie) {
		return werr
	}
	return err
}

// call makes the call and hands its output on; answered reports whether
// the server answered (and may have run the stage).
func (c *Caller) call(ctx context.Context, base string, job *engine.Job, body io.Reader, contentType string) (answered bool, err error) {
	a, err := c.client.Open(ctx, base, body, contentType)
	if err != nil {
		return false, err
	}
	defer a.Body.Close()
	return true, c.readAnswer(ctx, job, a)
}

// readAnswer checks an answer and sends its stream's chunks to job.Out.
func (c *Caller) readAnswer(ctx context.Context, job *engine.Job, a *Answer) error {
	if err := c.checkAnswer(a); err != nil {
		return err
	}
	sr := c.codec.NewStreamReader(a.Body)
	want := payload.Expect{Pipeline: c.pipeline, Digest: c.digest, Stage: c.next, NumStages: c.numIDs, Input: c.nextIn}
	wantKind := payload.FrameHandOff
	if c.ends {
		want.Stage, want.Input, wantKind = c.stage, c.output, payload.FrameResult
	}
	kind, env, err := sr.Header(&want)
	if err != nil {
		return c.streamError(ctx, err)
	}
	if kind != wantKind || env.From != c.stage {
		return fmt.Errorf("the answer's stream holds the output of stage %d, not of stage %d: does the server run the same pipeline?", env.From, c.stage)
	}
	for {
		chunk, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.streamError(ctx, err)
		}
		if err := job.Out.Send(ctx, chunk); err != nil {
			return err
		}
	}
}

// checkAnswer checks an answer's headers against the route.
func (c *Caller) checkAnswer(a *Answer) error {
	switch {
	case c.ends && !a.Finished:
		return fmt.Errorf("stage %d ends the route, but the answer goes on to stage %d: does the server run the same pipeline?", c.stage, a.Stage)
	case !c.ends && a.Finished:
		return fmt.Errorf("the answer is finished at stage %d, but stage %d feeds stage %d: does the server run the same pipeline?", a.Stage, c.stage, c.next)
	case !c.ends && a.Stage != c.next:
		return fmt.Errorf("the answer goes on to stage %d, but stage %d's successor is stage %d: does the server run the same pipeline?", a.Stage, c.stage, c.next)
	}
	return nil
}

// streamError types an error reading the answer's stream.
func (c *Caller) streamError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return AnswerError(err)
}

// request returns the call's body and content type. The body takes
// nothing of job.In until the transport first reads it, once the
// connection is made (so a call refused before that can be made again
// elsewhere): the stage 0 body of a request that entered whole is then
// its JSON request, from the prompt's text; a later stage's body, and a
// streamed request's stage 0 body, is written from job.In as the server
// reads it. Closing the body stops the writer.
func (c *Caller) request(ctx context.Context, job *engine.Job) (*inputBody, string) {
	if c.stage == EntryStage && job.Prompt.Feed == nil {
		return &inputBody{open: func(b *inputBody) (io.Reader, error) { return c.entryRequest(ctx, job) }}, "application/json"
	}
	id := job.RequestID
	if id == "" {
		id = fmt.Sprintf("hop-%d", time.Now().UnixNano())
	}
	from, prompt := c.upstream, job.Prompt
	if c.stage == EntryStage {
		// The request's text, as it arrives: stage 0's own input.
		from, prompt = EntryStage, engine.Prompt{}
	}
	head := &payload.Envelope{
		Pipeline: c.pipeline, Digest: c.digest, TransferID: id, RequestID: id,
		From: from, To: c.stage, Final: c.finalID, Outputs: c.outputs,
		Params: c.params(job.Params), Prompt: prompt,
		Trace: telemetry.Traceparent(ctx),
	}
	return &inputBody{open: func(b *inputBody) (io.Reader, error) {
		pipe := newBufPipe(pipeBuffer)
		b.startWriter(ctx, pipe, func(ctx context.Context) error { return c.writeInput(ctx, pipe, head, b.track(job.In)) })
		return pipe, nil
	}}, ContentType
}

// entryRequest reads stage 0's input, the prompt's text or its image, and
// returns its JSON request.
func (c *Caller) entryRequest(ctx context.Context, job *engine.Job) (io.Reader, error) {
	in, err := engine.RecvAll(ctx, job.In)
	if err != nil {
		return nil, err
	}
	var entry EntryInput
	var text strings.Builder
	for _, ch := range in {
		switch {
		case ch.Text != nil:
			text.WriteString(ch.Text.Text)
		case ch.Image != nil && len(in) == 1:
			entry.Image = base64.StdEncoding.EncodeToString(ch.Image.Bytes)
		default:
			return nil, fmt.Errorf("hop: stage 0 takes text or one image, got a %s chunk", ch.Kind())
		}
	}
	entry.Text = text.String()
	prompt, err := json.Marshal(entry)
	if err != nil {
		return nil, err
	}
	stage := EntryStage
	req := &RunRequest{StageID: &stage, StageInput: prompt, RequestID: job.RequestID, OutputModalities: c.outputs}
	if job.Params != nil {
		req.SamplingParams = c.params(job.Params)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// writeInput writes a later stage's input stream: the header, then each
// chunk of in as it comes, then the end.
func (c *Caller) writeInput(ctx context.Context, w io.Writer, head *payload.Envelope, in engine.Source) error {
	sw := c.codec.NewStreamWriter(w)
	if err := sw.Header(payload.FrameHandOff, head); err != nil {
		return encodeError(err)
	}
	for {
		ch, err := in.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return sw.End()
		}
		if err != nil {
			return err
		}
		if err := sw.Data(&ch); err != nil {
			return encodeError(err)
		}
	}
}

// encodeError makes a payload the codec refuses to write (too large) the
// request's fault.
func encodeError(err error) error {
	var pe *payload.Error
	if errors.As(err, &pe) {
		return &engine.InputError{Reason: pe.Message}
	}
	return err
}

// params returns a sampling_params array with one entry per stage id, this
// stage's set to mine.
func (c *Caller) params(mine json.RawMessage) []json.RawMessage {
	ps := make([]json.RawMessage, c.numIDs)
	ps[c.stage] = mine
	return ps
}
