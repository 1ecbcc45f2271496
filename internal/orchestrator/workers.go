package orchestrator

// The goroutines that run stage tasks, kept parked between tasks.

import "sync"

// task is one stage of one request to run: rq's binding at index stage.
type task struct {
	rq    *request
	stage int
}

func (t task) run() { t.rq.runStage(&t.rq.bindings[t.stage]) }

// workers runs stage tasks on goroutines that outlive one task: a
// goroutine that finishes a task parks until the next one, or until Close.
// Starting a goroutine per task costs more than the rest of the
// orchestration of a short request: a new goroutine's stack must grow (be
// copied) to the depth of an engine's Process call, every time. The parked
// goroutines are as many as the most tasks that ever ran at once, which
// admission bounds.
type workers struct {
	mu     sync.Mutex
	idle   []chan task // parked workers, most recent last
	closed bool
	wg     sync.WaitGroup
}

// Go runs t on a parked worker, or on a new one when none is parked.
func (w *workers) Go(t task) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- t
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.run(t)
}

func (w *workers) run(t task) {
	defer w.wg.Done()
	ch := make(chan task, 1)
	for t.rq != nil {
		t.run()
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		t = <-ch
	}
}

// Close makes the parked workers exit and waits for every worker, busy
// ones included, to return. Go must not be called after Close.
func (w *workers) Close() {
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- task{}
	}
	w.wg.Wait()
}
