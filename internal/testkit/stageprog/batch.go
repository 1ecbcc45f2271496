package stageprog

// Batch messages, for an engine that batches (engine.Batcher): each job
// of a batch is one item of one RunBatch call.

import (
	"context"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// BatchUnit is the Input of an item Serve hands RunBatch: one job of a
// batch message, its request's fields (In and Out nil) and its input
// chunk, and Ctx, done once the runtime cancels the job. RunBatch sets
// the item's Output to the job's output chunks ([]engine.Chunk), or its
// Err.
type BatchUnit struct {
	Job   engine.Job
	Chunk engine.Chunk
	Ctx   context.Context
}

// batch runs the jobs of a batch message on a goroutine of its own, with
// RunBatch, and sends each one's output and end.
func (s *server) batch(ctx context.Context, h *stageproto.Header, data []byte) error {
	b, ok := s.e.(engine.Batcher)
	if !ok {
		return protocolError("a batch message, but the stage does not batch")
	}
	parts, err := stageproto.SplitBatchData(h.Jobs, data)
	if err != nil {
		return err
	}
	items := make([]*engine.BatchItem, len(h.Jobs))
	jobs := make([]*progJob, len(h.Jobs))
	bctx, cancel := context.WithCancel(ctx)
	for i := range h.Jobs {
		bj := &h.Jobs[i]
		c, err := stageproto.DecodeChunk(&bj.ChunkHeader, parts[i])
		if err != nil {
			cancel()
			return protocolError("job %d: %v", bj.Job, err)
		}
		params := bj.Params
		if string(params) == "null" {
			params = nil
		}
		jctx, jcancel := context.WithCancel(bctx)
		jobs[i] = &progJob{s: s, id: bj.Job, cancel: jcancel, ctx: jctx}
		items[i] = &engine.BatchItem{Input: &BatchUnit{Ctx: jctx, Chunk: c, Job: engine.Job{RequestID: bj.RequestID, StageID: bj.StageID,
			Params: params, Prompt: engine.Prompt{Text: bj.Prompt}}}}
	}
	s.mu.Lock()
	for _, j := range jobs {
		s.jobs[j.id] = j
	}
	s.mu.Unlock()
	s.wg.Go(func() {
		defer cancel()
		err := b.RunBatch(bctx, items)
		for i, j := range jobs {
			s.endBatchJob(ctx, j, items[i], err, h.Window)
		}
	})
	return nil
}

// endBatchJob sends the output of a batch's job and its end.
func (s *server) endBatchJob(ctx context.Context, j *progJob, it *engine.BatchItem, err error, window int) {
	cancelled := j.ctx.Err() != nil && ctx.Err() == nil
	j.cancel()
	s.mu.Lock()
	delete(s.jobs, j.id)
	s.mu.Unlock()
	if err == nil {
		err = it.Err
	}
	out, _ := it.Output.([]engine.Chunk)
	if window <= 0 {
		window = stageproto.DefaultWindow
	}
	if err == nil && len(out) > window {
		err = fmt.Errorf("%d output chunks; a job of a batch sends at most its window, %d", len(out), window)
	}
	if err == nil && !cancelled {
		for _, c := range out {
			h, data, err := stageproto.EncodeChunk(c)
			if err == nil {
				err = s.w.Write(stageproto.Chunk{Type: stageproto.TypeOutput, Job: j.id, ChunkHeader: h}, data)
			}
			if err != nil {
				_ = s.w.Write(endOf(j.id, err, false), nil)
				return
			}
		}
	}
	_ = s.w.Write(endOf(j.id, err, cancelled), nil)
}
