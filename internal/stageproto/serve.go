package stageproto

// A program's side of the protocol, in Go: Serve runs an engine.Engine as
// a stage program.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// Serve speaks the program's side of the protocol on r and w for e: it
// says hello, warms e on warm, checks params when e is an
// engine.ParamsChecker, and runs each job with e.Process, its input and
// output against credit. It returns nil when the runtime asks it to shut
// down or closes r (once the jobs running have ended: they are
// cancelled), and an error when the runtime breaks the protocol or w
// fails.
func Serve(ctx context.Context, r io.Reader, w io.Writer, hello Hello, e engine.Engine) error {
	hello.Type, hello.Protocol = TypeHello, Version
	if hello.MaxJobs == 0 {
		hello.MaxJobs = DefaultMaxJobs
	}
	if hello.Window == 0 {
		hello.Window = DefaultWindow
	}
	s := &server{e: e, w: NewWriter(w), hello: hello, jobs: map[int64]*progJob{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.wg.Wait() // after cancel: every job's context ends
	if err := s.w.Write(hello, nil); err != nil {
		return err
	}
	return s.loop(ctx, NewReader(r))
}

// server is one connection's state.
type server struct {
	e     engine.Engine
	w     *Writer
	hello Hello
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
	taken  int // input chunks taken and not yet credited; Recv's own
}

func (s *server) loop(ctx context.Context, r *Reader) error {
	for {
		var h Header
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
	}
}

// handle handles one message of the runtime; stop is set on shutdown.
func (s *server) handle(ctx context.Context, h *Header, data []byte) (stop bool, err error) {
	switch h.Type {
	case TypeWarm:
		if err := s.e.Warm(ctx); err != nil {
			return false, s.w.Write(Error{Type: TypeError, Message: err.Error()}, nil)
		}
		return false, s.w.Write(Bare{Type: TypeReady}, nil)
	case TypeCheck:
		answer := Checked{Type: TypeChecked, ID: h.ID}
		if c, ok := s.e.(engine.ParamsChecker); ok {
			if err := c.CheckParams(h.Params); err != nil {
				f := &ParamFault{Reason: err.Error()}
				var pe *engine.ParamError
				if errors.As(err, &pe) {
					f.Field, f.Reason = pe.Field, pe.Reason
				}
				answer.Fault = f
			}
		}
		return false, s.w.Write(answer, nil)
	case TypeJob:
		s.start(ctx, h)
		return false, nil
	case TypeInput, TypeInputEnd, TypeCredit, TypeCancel:
		return false, s.jobMessage(h, data)
	case TypeShutdown:
		return true, nil
	}
	return false, nil
}

// jobMessage hands a message of a job to it; one for a job that has ended
// is dropped.
func (s *server) jobMessage(h *Header, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[h.Job]
	if j == nil {
		return nil
	}
	switch h.Type {
	case TypeInput:
		if j.ended {
			return protocolErrorf("input for job %d after its input_end", j.id)
		}
		c, err := DecodeChunk(&h.ChunkHeader, data)
		if err != nil {
			return protocolErrorf("job %d: %v", j.id, err)
		}
		select {
		case j.in <- c:
		default:
			return protocolErrorf("input for job %d beyond the credit the program gave", j.id)
		}
	case TypeInputEnd:
		if !j.ended {
			j.ended = true
			close(j.in)
		}
	case TypeCredit:
		select {
		case j.credit <- h.Chunks:
		default:
			return protocolErrorf("more credit for job %d than it has output", j.id)
		}
	case TypeCancel:
		j.cancel()
	}
	return nil
}

// start runs the job h starts, on a goroutine of its own.
func (s *server) start(ctx context.Context, h *Header) {
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
		return JobEvent{Type: TypeCancelled, Job: id}
	case err == nil:
		return JobEvent{Type: TypeDone, Job: id}
	}
	var pe *engine.ParamError
	var ie *engine.InputError
	switch {
	case errors.As(err, &pe):
		return Error{Type: TypeError, Job: id, Code: CodeBadParams, Field: pe.Field, Message: pe.Reason}
	case errors.As(err, &ie):
		return Error{Type: TypeError, Job: id, Code: CodeBadInput, Message: ie.Reason}
	}
	return Error{Type: TypeError, Job: id, Code: CodeFailed, Message: err.Error()}
}

// Recv implements engine.Source: the job's input, giving credit back as it
// is taken.
func (j *progJob) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-j.in:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		if j.taken++; j.taken >= CreditBatch(cap(j.in)) {
			if err := j.s.w.Write(Credit{Type: TypeCredit, Job: j.id, Chunks: j.taken}, nil); err != nil {
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
	h, data, err := EncodeChunk(c)
	if err != nil {
		return err
	}
	if err := s.j.s.w.Write(Chunk{Type: TypeOutput, Job: s.j.id, ChunkHeader: h}, data); err != nil {
		return fmt.Errorf("stage protocol: %w", err)
	}
	s.credit--
	return nil
}

// CreditBatch is how many chunks of a window a side takes in before it
// gives credit back: half of it, so a writer never waits long and a
// credit message serves several chunks.
func CreditBatch(window int) int { return max(window/2, 1) }
