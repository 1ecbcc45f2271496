package external

// Batches: a program whose hello offers them (max_batch) gets its work as
// batch messages, each carrying the units of several requests (a job per
// input chunk), which the runtime gathers as it does for any batching
// engine (engine.Batcher).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

var _ engine.Batcher = (*Engine)(nil)

// unit is one unit of work for a batching program: a job of one input
// chunk, its entry in a batch message encoded (its number included).
type unit struct {
	id    int64
	entry stageproto.BatchEntry
}

// processUnits runs jb at a program that takes batches: each input chunk
// (each piece of one, stageproto.SplitChunk) is a unit handed to
// engine.RunBatched, and its output goes on once it has run, in order.
func (e *Engine) processUnits(ctx context.Context, jb *engine.Job) error {
	params := jb.Params
	if len(params) == 0 {
		params = []byte("null")
	}
	for {
		c, err := jb.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		pieces := stageproto.SplitChunk(c)
		items := make([]*engine.BatchItem, len(pieces))
		for i, p := range pieces {
			h, data, err := stageproto.EncodeChunk(p)
			if err != nil {
				return err
			}
			u := &unit{id: e.nextID.Add(1)}
			u.entry, err = stageproto.NewBatchEntry(stageproto.BatchJob{Job: u.id, RequestID: jb.RequestID, StageID: jb.StageID,
				Params: params, Prompt: jb.Prompt.Text, ChunkHeader: h}, data)
			if err != nil {
				return err
			}
			items[i] = &engine.BatchItem{Input: u, Size: len(data)}
		}
		if err := engine.RunBatched(ctx, e, items); err != nil {
			return err
		}
		for _, it := range items {
			if it.Err != nil {
				return it.Err
			}
			for _, out := range it.Output.([]engine.Chunk) {
				if err := jb.Out.Send(ctx, out); err != nil {
					return err
				}
			}
		}
	}
}

// RunBatch implements engine.Batcher: the items go to the program in as
// few batch messages as its max_batch and the framing's limits allow, one
// after another, each holding one of the program's max_jobs slots while
// it runs. Each item's Output is its job's output chunks, or its Err the
// job's error; a lost replica fails them all.
func (e *Engine) RunBatch(_ context.Context, items []*engine.BatchItem) error {
	entries := make([]stageproto.BatchEntry, len(items))
	for i, it := range items {
		entries[i] = it.Input.(*unit).entry
	}
	at := 0
	for _, b := range stageproto.PackBatches(entries, e.info.MaxBatch) {
		if err := e.runBatch(b, items[at:at+len(b)]); err != nil {
			return err
		}
		at += len(b)
	}
	return nil
}

// runBatch sends one batch message of entries, the jobs of items, and
// waits for every job's end. A batch whose jobs send nothing for the
// stage's timeout is cancelled: its unfinished jobs fail.
func (e *Engine) runBatch(entries []stageproto.BatchEntry, items []*engine.BatchItem) error {
	select {
	case e.slots <- struct{}{}:
	case <-e.Lost():
		return e.Loss.Err()
	}
	defer func() { <-e.slots }()
	// The jobs share one channel of events, room for each one's window of
	// output and its end: the program gets no credit back for a job of a
	// batch, whose output the runtime takes once the job has ended.
	events := make(chan event, len(items)*(outputWindow+1))
	jobs := make(map[*job]int, len(items))
	e.mu.Lock()
	for i, it := range items {
		j := &job{id: it.Input.(*unit).id, kind: e.spec.Output, out: events}
		j.outCredit.Store(outputWindow)
		e.jobs[j.id] = j
		jobs[j] = i
		it.Output = []engine.Chunk{}
	}
	e.mu.Unlock()
	if err := e.w.WriteBatch(outputWindow, entries); err != nil {
		for j := range jobs {
			e.endJobIf(j, true)
		}
		return e.writeError(err)
	}
	return e.awaitBatch(jobs, items, events)
}

// awaitBatch gathers the events of a batch's jobs into items until every
// job has ended.
func (e *Engine) awaitBatch(jobs map[*job]int, items []*engine.BatchItem, events chan event) error {
	silence := newSilence(e.spec.Timeout)
	defer silence.stop()
	var timedOut error
	var answer <-chan time.Time // the bound of the cancel's answer
	for len(jobs) > 0 {
		select {
		case ev := <-events:
			i, ok := jobs[ev.job]
			if !ok {
				continue
			}
			it := items[i]
			switch {
			case !ev.end:
				it.Output = append(it.Output.([]engine.Chunk), ev.chunk)
			case timedOut != nil:
				it.Err = timedOut
			default:
				it.Err = e.ended(ev.job, ev)
			}
			if ev.end {
				delete(jobs, ev.job)
			}
			if timedOut == nil {
				silence.reset(e.spec.Timeout)
			}
		case <-silence.c:
			timedOut = fmt.Errorf("%s: stage %d (%s): a batch made nothing for its timeout, %s", Name, e.spec.StageID, e.spec.Name, e.spec.Timeout)
			for j := range jobs {
				if err := e.w.Write(stageproto.JobEvent{Type: stageproto.TypeCancel, Job: j.id}, nil); err != nil {
					return e.writeError(err)
				}
			}
			t := time.NewTimer(e.cfg.CancelTimeout)
			defer t.Stop()
			answer = t.C
		case <-answer:
			e.lose(lossCancel, fmt.Errorf("%d jobs of a batch, within %s", len(jobs), e.cfg.CancelTimeout))
			return e.Loss.Err()
		case <-e.Lost():
			return e.Loss.Err()
		}
	}
	return nil
}
