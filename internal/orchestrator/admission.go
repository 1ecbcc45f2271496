package orchestrator

// Admission: the registry of the requests in flight by id, the in-flight
// limit, and what reaches a request by its id (Abort, Lookup).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
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

func (o *Orchestrator) newID() string {
	return idPrefix + strconv.FormatUint(o.nextID.Add(1), 10)
}

// admit registers rq under its id and counts it against the in-flight
// limit. A request claims its id; a stage call does not.
func (o *Orchestrator) admit(rq *request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.closing:
		return errShutdown
	default:
	}
	h := o.active[rq.id]
	if h != nil && h.req != nil && !rq.stageCall {
		o.metrics.requests.WithLabelValues(string(CodeConflict)).Inc()
		return newError(CodeConflict, "request id %q is still in use (%s); reuse it once that request has ended", rq.id, State(h.req.state.Load()))
	}
	if o.inflight >= o.cfg.Deploy.MaxInflight {
		o.metrics.requests.WithLabelValues(string(CodeOverloaded)).Inc()
		return newError(CodeOverloaded, "server busy: %d requests in flight, the limit is %d; retry later", o.inflight, o.cfg.Deploy.MaxInflight)
	}
	if h == nil {
		h = &holders{}
		o.active[rq.id] = h
	}
	if rq.stageCall {
		if h.calls == nil {
			h.calls = map[*request]struct{}{}
		}
		h.calls[rq] = struct{}{}
	} else {
		h.req = rq
	}
	o.inflight++
	o.metrics.inflight.Set(float64(o.inflight))
	if o.inflight == 1 && o.opts.Idle != nil {
		o.opts.Idle.Busy()
	}
	return nil
}

// release removes rq from the requests in flight and frees its id when
// nothing else holds it; the last release wakes waitIdle and tells the
// IdleObserver.
func (o *Orchestrator) release(rq *request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.active[rq.id]; h != nil {
		if rq.stageCall {
			delete(h.calls, rq)
		} else if h.req == rq {
			h.req = nil
		}
		if h.req == nil && len(h.calls) == 0 {
			delete(o.active, rq.id)
		}
	}
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

// inFlight returns every request in flight.
func (o *Orchestrator) inFlight() []*request {
	o.mu.Lock()
	defer o.mu.Unlock()
	var reqs []*request
	for _, h := range o.active {
		reqs = h.appendTo(reqs)
	}
	return reqs
}

// Abort aborts the request with the given id, and every stage call of that
// id, and waits for their stages to drain. A second Abort of the same
// request joins the first. If a drain outlasts the deployment's abort
// timeout, the request is left in the abort_failed state, holding its id
// until the drain ends, and Abort returns an error with code abort_failed.
func (o *Orchestrator) Abort(ctx context.Context, id string) error {
	o.mu.Lock()
	var reqs []*request
	if h := o.active[id]; h != nil {
		reqs = h.appendTo(nil)
	}
	o.mu.Unlock()
	if len(reqs) == 0 {
		return newError(CodeNotFound, "no active request with id %q", id)
	}
	for _, rq := range reqs {
		rq.abort(errAborted)
	}
	timer := time.NewTimer(o.cfg.Deploy.AbortTimeout)
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
			o.log.WarnContext(reqs[0].logCtx(), "abort did not drain in time", "request_id", id, "timeout", o.cfg.Deploy.AbortTimeout)
			return newError(CodeAbortFailed, "request %q did not drain within %s; its id stays in use until it does", id, o.cfg.Deploy.AbortTimeout)
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
func (o *Orchestrator) Lookup(id string) (State, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.active[id]
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
