// Package stageprog is a stage program's side of the stage protocol
// (docs/stage-protocol.md), in Go: Serve runs an engine.Engine as a stage
// program, for the test stages of the tests that drive the runtime's side
// (packages engine/external and stagecheck) and for measuring the protocol
// against the SDKs. Only tests import it: it lives under testkit, not
// beside the tests of one package, because two packages' tests serve
// their test stages with it.
package stageprog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// Serve speaks the program's side of the protocol on r and w for e: it
// says hello, warms e on warm, checks params when e is an
// engine.ParamsChecker, and runs each job with e.Process, its input and
// output against credit, and each batch with e.RunBatch when e is an
// engine.Batcher (hello's MaxBatch says it takes batches). It returns nil when the runtime asks it to shut
// down or closes r (once the jobs running have ended: they are
// cancelled), and an error when the runtime breaks the protocol or w
// fails.
func Serve(ctx context.Context, r io.Reader, w io.Writer, hello stageproto.Hello, e engine.Engine) error {
	hello.Type, hello.Protocol = stageproto.TypeHello, stageproto.Version
	if hello.MaxJobs == 0 {
		hello.MaxJobs = stageproto.DefaultMaxJobs
	}
	if hello.Window == 0 {
		hello.Window = stageproto.DefaultWindow
	}
	s := &server{e: e, w: stageproto.NewWriter(w), hello: hello, jobs: map[int64]*progJob{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.wg.Wait() // after cancel: every job's context ends
	if err := s.w.Write(hello, nil); err != nil {
		return err
	}
	return s.loop(ctx, stageproto.NewReader(r))
}

// server is one connection's state.
type server struct {
	e     engine.Engine
	w     *stageproto.Writer
	hello stageproto.Hello
	wg    sync.WaitGroup

	mu   sync.Mutex
	jobs map[int64]*progJob
}

// progJob is a job on the program's side.
type progJob struct {
	s      *server
	id     int64
	in     chan engine.Chunk // the input, within the credit the program gave
	ended  bool              // input_end came; guarded by server.mu
	credit chan int          // the runtime's credit for output
	cancel context.CancelFunc
	ctx    context.Context // a batch's job's; nil for a job
	taken  int             // input chunks taken and not yet credited; Recv's own
}

func (s *server) loop(ctx context.Context, r *stageproto.Reader) error {
	for {
		var h stageproto.Header
		data, err := r.Read(&h)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		stop, err := s.handle(ctx, &h, data)
		if err != nil || stop {
			return err
		}
		// The job the message woke runs on this thread first: see the
		// runtime's side (engine/external's Engine.read).
		runtime.Gosched()
	}
}

// handle handles one message of the runtime; stop is set on shutdown.
func (s *server) handle(ctx context.Context, h *stageproto.Header, data []byte) (stop bool, err error) {
	switch h.Type {
	case stageproto.TypeWarm:
		if err := s.e.Warm(ctx); err != nil {
			return false, s.w.Write(stageproto.Error{Type: stageproto.TypeError, Message: err.Error()}, nil)
		}
		return false, s.w.Write(stageproto.Bare{Type: stageproto.TypeReady}, nil)
	case stageproto.TypeCheck:
		answer := stageproto.Checked{Type: stageproto.TypeChecked, ID: h.ID}
		if c, ok := s.e.(engine.ParamsChecker); ok {
			if err := c.CheckParams(h.Params); err != nil {
				f := &stageproto.ParamFault{Reason: err.Error()}
				var pe *engine.ParamError
				if errors.As(err, &pe) {
					f.Field, f.Reason = pe.Field, pe.Reason
				}
				answer.Fault = f
			}
		}
		return false, s.w.Write(answer, nil)
	case stageproto.TypeJob:
		s.start(ctx, h)
		return false, nil
	case stageproto.TypeBatch:
		return false, s.batch(ctx, h, data)
	case stageproto.TypeInput, stageproto.TypeInputEnd, stageproto.TypeCredit, stageproto.TypeCancel:
		return false, s.jobMessage(h, data)
	case stageproto.TypeShutdown:
		return true, nil
	}
	return false, nil
}

// jobMessage hands a message of a job to it; one for a job that has ended
// is dropped.
func (s *server) jobMessage(h *stageproto.Header, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[h.Job]
	if j == nil {
		return nil
	}
	switch h.Type {
	case stageproto.TypeInput:
		if j.ended {
			return protocolError("input for job %d after its input_end", j.id)
		}
		c, err := stageproto.DecodeChunk(&h.ChunkHeader, data)
		if err != nil {
			return protocolError("job %d: %v", j.id, err)
		}
		select {
		case j.in <- c:
		default:
			return protocolError("input for job %d beyond the credit the program gave", j.id)
		}
	case stageproto.TypeInputEnd:
		if j.in == nil {
			return protocolError("input_end for job %d, of a batch", j.id)
		}
		if !j.ended {
			j.ended = true
			close(j.in)
		}
	case stageproto.TypeCredit:
		select {
		case j.credit <- h.Chunks:
		default:
			return protocolError("more credit for job %d than it has output", j.id)
		}
	case stageproto.TypeCancel:
		j.cancel()
	}
	return nil
}

// start runs the job h starts, on a goroutine of its own.
func (s *server) start(ctx context.Context, h *stageproto.Header) {
	jctx, cancel := context.WithCancel(ctx)
	j := &progJob{s: s, id: h.Job, in: make(chan engine.Chunk, s.hello.Window), credit: make(chan int, max(h.Window, 1)), cancel: cancel}
	s.mu.Lock()
	s.jobs[j.id] = j
	s.mu.Unlock()
	params := h.Params
	if string(params) == "null" {
		params = nil
	}
	jb := &engine.Job{RequestID: h.RequestID, StageID: h.StageID, Params: params,
		Prompt: engine.Prompt{Text: h.Prompt}, In: j, Out: &progSink{j: j, credit: h.Window}}
	s.wg.Go(func() {
		err := s.e.Process(jctx, jb)
		cancelled := jctx.Err() != nil && ctx.Err() == nil
		cancel()
		s.mu.Lock()
		delete(s.jobs, j.id)
		s.mu.Unlock()
		_ = s.w.Write(endOf(j.id, err, cancelled), nil)
	})
}

// endOf is the message that ends a job: done, cancelled or its error.
func endOf(id int64, err error, cancelled bool) any {
	switch {
	case cancelled:
		return stageproto.JobEvent{Type: stageproto.TypeCancelled, Job: id}
	case err == nil:
		return stageproto.JobEvent{Type: stageproto.TypeDone, Job: id}
	}
	var pe *engine.ParamError
	var ie *engine.InputError
	switch {
	case errors.As(err, &pe):
		return stageproto.Error{Type: stageproto.TypeError, Job: id, Code: stageproto.CodeBadParams, Field: pe.Field, Message: pe.Reason}
	case errors.As(err, &ie):
		return stageproto.Error{Type: stageproto.TypeError, Job: id, Code: stageproto.CodeBadInput, Message: ie.Reason}
	}
	return stageproto.Error{Type: stageproto.TypeError, Job: id, Code: stageproto.CodeFailed, Message: err.Error()}
}

// Recv implements engine.Source: the job's input, giving credit back as it
// is taken.
func (j *progJob) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-j.in:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		if j.taken++; j.taken >= stageproto.CreditBatch(cap(j.in)) {
			if err := j.s.w.Write(stageproto.Credit{Type: stageproto.TypeCredit, Job: j.id, Chunks: j.taken}, nil); err != nil {
				return engine.Chunk{}, err
			}
			j.taken = 0
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// progSink is a job's output, sent against the runtime's credit.
type progSink struct {
	j      *progJob
	credit int
}

// Send implements engine.Sink.
func (s *progSink) Send(ctx context.Context, c engine.Chunk) error {
	for s.credit == 0 {
		select {
		case n := <-s.j.credit:
			s.credit += n
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h, data, err := stageproto.EncodeChunk(c)
	if err != nil {
		return err
	}
	if err := s.j.s.w.Write(stageproto.Chunk{Type: stageproto.TypeOutput, Job: s.j.id, ChunkHeader: h}, data); err != nil {
		return fmt.Errorf("stage protocol: %w", err)
	}
	s.credit--
	return nil
}

func protocolError(format string, args ...any) error {
	return &stageproto.ProtocolError{Msg: fmt.Sprintf(format, args...)}
}
