package orchestrator

// Admission: the registry of the requests in flight by id, the in-flight
// limit, and what reaches a request by its id (Abort, Lookup).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// State is where an admitted request is in its life.
type State int32

// The states of an admitted request.
const (
	StateActive      State = iota // running
	StateAborting                 // aborted, its stages draining
	StateAbortFailed              // the abort outlasted its timeout; the id stays held until the drain ends
)

func (s State) String() string {
	switch s {
	case StateActive:
		return "active"
	case StateAborting:
		return "aborting"
	case StateAbortFailed:
		return "abort_failed"
	}
	return "unknown"
}

// MaxIDLen bounds caller-supplied request ids.
const MaxIDLen = 128

// holders are the requests in flight under one id: at most one request,
// which claims the id, and any number of stage calls, which do not.
type holders struct {
	req   *request
	calls map[*request]struct{}
}

// appendTo appends the requests of h to rs.
func (h *holders) appendTo(rs []*request) []*request {
	if h.req != nil {
		rs = append(rs, h.req)
	}
	for rq := range h.calls {
		rs = append(rs, rq)
	}
	return rs
}

func checkID(id string) error {
	if len(id) > MaxIDLen {
		return newError(CodeBadRequest, "request id is %d bytes long; the limit is %d", len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return newError(CodeBadRequest, "request id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return newError(CodeBadRequest, "request id %q may hold only printable characters without spaces", id)
		}
	}
	return nil
}

// idPrefix starts the ids this process generates: random, so that ids of
// two servers (or two runs of one) do not collide in a shared log.
var idPrefix = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req-" + hex.EncodeToString(b[:]) + "-"
}()

// newID returns an id no request of o's registry had: the registry numbers
// them, so that the pipelines that share it never make the same one.
func (o *Orchestrator) newID() string {
	return idPrefix + strconv.FormatUint(o.reqs.next.Add(1), 10)
}

// Requests is the registry of the requests in flight under their ids. The
// orchestrators of one server share one (Options.Requests), so that an id
// is unique across its pipelines and an abort or lookup finds a request
// whatever its pipeline. Its lock is held only to claim, free and find ids;
// admission limits and queues stay each pipeline's own. The zero value is
// not usable: use NewRequests.
type Requests struct {
	next   atomic.Uint64 // the number of the last generated id
	mu     sync.Mutex
	active map[string]*holders
}

// NewRequests returns an empty registry.
func NewRequests() *Requests { return &Requests{active: map[string]*holders{}} }

// claim registers rq under its id: a request claims the id, and is refused
// while another request holds it; a stage call does not.
func (rs *Requests) claim(rq *request) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h := rs.active[rq.id]
	if h != nil && h.req != nil && !rq.stageCall {
		return newError(CodeConflict, "request id %q is still in use (%s); reuse it once that request has ended", rq.id, State(h.req.state.Load()))
	}
	if h == nil {
		h = &holders{}
		rs.active[rq.id] = h
	}
	if rq.stageCall {
		if h.calls == nil {
			h.calls = map[*request]struct{}{}
		}
		h.calls[rq] = struct{}{}
	} else {
		h.req = rq
	}
	return nil
}

// drop removes rq, and frees its id when nothing else holds it.
func (rs *Requests) drop(rq *request) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h := rs.active[rq.id]
	if h == nil {
		return
	}
	if rq.stageCall {
		delete(h.calls, rq)
	} else if h.req == rq {
		h.req = nil
	}
	if h.req == nil && len(h.calls) == 0 {
		delete(rs.active, rq.id)
	}
}

// of returns the requests and stage calls of id.
func (rs *Requests) of(id string) []*request {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if h := rs.active[id]; h != nil {
		return h.appendTo(nil)
	}
	return nil
}

// admit counts rq against the in-flight limit and registers it under its
// id (Requests.claim).
func (o *Orchestrator) admit(rq *request) error {
	o.mu.Lock()
	select {
	case <-o.closing:
		o.mu.Unlock()
		return errShutdown
	default:
	}
	if n := o.inflight; n >= o.cfg.Deploy.MaxInflight {
		o.mu.Unlock()
		o.metrics.requests.WithLabelValues(string(CodeOverloaded)).Inc()
		return newError(CodeOverloaded, "server busy: %d requests in flight, the limit is %d; retry later", n, o.cfg.Deploy.MaxInflight)
	}
	o.inflight++
	o.live[rq] = struct{}{}
	o.metrics.inflight.Set(float64(o.inflight))
	if o.inflight == 1 && o.opts.Idle != nil {
		o.opts.Idle.Busy()
	}
	o.mu.Unlock()
	if err := o.reqs.claim(rq); err != nil {
		o.metrics.requests.WithLabelValues(string(CodeConflict)).Inc()
		o.uncount(rq)
		return err
	}
	return nil
}

// release removes rq from the requests in flight and frees its id when
// nothing else holds it; the last release wakes waitIdle and tells the
// IdleObserver.
func (o *Orchestrator) release(rq *request) {
	o.reqs.drop(rq)
	o.uncount(rq)
}

// uncount takes rq off the in-flight count.
func (o *Orchestrator) uncount(rq *request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.live, rq)
	o.inflight--
	o.metrics.inflight.Set(float64(o.inflight))
	if o.inflight == 0 && o.opts.Idle != nil {
		o.opts.Idle.Idle()
	}
	if o.inflight == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
}

// waitIdle waits until no request is in flight.
func (o *Orchestrator) waitIdle(ctx context.Context) error {
	for {
		o.mu.Lock()
		if o.inflight == 0 {
			o.mu.Unlock()
			return nil
		}
		if o.idle == nil {
			o.idle = make(chan struct{})
		}
		idle := o.idle
		o.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// inFlight returns every request in flight here.
func (o *Orchestrator) inFlight() []*request {
	o.mu.Lock()
	defer o.mu.Unlock()
	reqs := make([]*request, 0, len(o.live))
	for rq := range o.live {
		reqs = append(reqs, rq)
	}
	return reqs
}

// Abort aborts the request with the given id and every stage call of that
// id, whatever their pipeline (see Requests.Abort).
func (o *Orchestrator) Abort(ctx context.Context, id string) error { return o.reqs.Abort(ctx, id) }

// Lookup returns the state of the request with the given id, whatever its
// pipeline (see Requests.Lookup).
func (o *Orchestrator) Lookup(id string) (State, bool) { return o.reqs.Lookup(id) }

// Abort aborts the request with the given id, and every stage call of that
// id, and waits for their stages to drain. A second Abort of the same
// request joins the first. If a drain outlasts the deployment's abort
// timeout, the request is left in the abort_failed state, holding its id
// until the drain ends, and Abort returns an error with code abort_failed.
func (rs *Requests) Abort(ctx context.Context, id string) error {
	reqs := rs.of(id)
	if len(reqs) == 0 {
		return newError(CodeNotFound, "no active request with id %q", id)
	}
	timeout := time.Duration(0)
	for _, rq := range reqs {
		rq.abort(errAborted)
		timeout = max(timeout, rq.o.cfg.Deploy.AbortTimeout)
	}
	o := reqs[0].o
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, rq := range reqs {
		select {
		case <-rq.done:
		case <-timer.C:
			for _, rq := range reqs {
				select {
				case <-rq.done:
				default:
					rq.state.Store(int32(StateAbortFailed))
				}
			}
			o.metrics.aborts.WithLabelValues(string(CodeAbortFailed)).Inc()
			o.log.WarnContext(reqs[0].logCtx(), "abort did not drain in time", "request_id", id, "timeout", timeout)
			return newError(CodeAbortFailed, "request %q did not drain within %s; its id stays in use until it does", id, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.metrics.aborts.WithLabelValues("drained").Inc()
	return nil
}

// Lookup returns the state of the active or draining request with the
// given id, or of its stage calls (the least advanced one's: active before
// aborting before abort_failed).
func (rs *Requests) Lookup(id string) (State, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h, ok := rs.active[id]
	if !ok {
		return 0, false
	}
	if h.req != nil {
		return State(h.req.state.Load()), true
	}
	state := StateAbortFailed
	for rq := range h.calls {
		state = min(state, State(rq.state.Load()))
	}
	return state, true
}
