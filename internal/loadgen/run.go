package loadgen

// Run: the load itself, closed-loop or at a rate, with aborts and reused
// ids.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Defaults of Options.
const (
	DefaultTimeout  = time.Minute
	DefaultLeakWait = 5 * time.Second
)

// MaxOutstanding bounds the requests in flight of a run at a fixed rate.
const MaxOutstanding = 1024

// AbortMode says how aborted requests are aborted.
type AbortMode int

// The abort modes.
const (
	AbortBoth   AbortMode = iota // half by DELETE, half by hanging up, at random
	AbortDelete                  // DELETE /v1/requests/{id}, then hang up
	AbortHangUp                  // hang up
)

var abortModes = []string{AbortBoth: "both", AbortDelete: "delete", AbortHangUp: "hangup"}

func (m AbortMode) String() string { return abortModes[m] }

// ParseAbortMode parses "both", "delete" or "hangup".
func ParseAbortMode(s string) (AbortMode, error) {
	for m, name := range abortModes {
		if s == name {
			return AbortMode(m), nil
		}
	}
	return 0, fmt.Errorf("unknown abort mode %q: use %s", s, strings.Join(abortModes, ", "))
}

// Options configure a run. Exactly one of Requests and Duration, and
// exactly one of Concurrency and Rate, must be set.
type Options struct {
	// Requests is the number of requests to send.
	Requests int
	// Duration is how long to keep sending requests.
	Duration time.Duration
	// Concurrency is the number of requests kept in flight (a closed loop).
	Concurrency int
	// Rate is the number of requests started per second (an open loop).
	Rate float64
	// Texts are spoken in turn; nil means DefaultTexts.
	Texts []string
	// AbortRatio is the fraction of requests to abort, 0 to 1.
	AbortRatio float64
	// AbortMode is how they are aborted.
	AbortMode AbortMode
	// ReuseIDs, when positive, is the size of a pool of request ids that
	// requests take in turn, each once the server has let go of it.
	ReuseIDs int
	// Timeout bounds one request (0: DefaultTimeout).
	Timeout time.Duration
	// LeakWait bounds the leak check after the load (0: DefaultLeakWait).
	LeakWait time.Duration
	// Seed seeds the choice of requests to abort and where.
	Seed uint64
	// OnResult, when set, is called with each request's result as it
	// ends, from any goroutine, one call at a time.
	OnResult func(Result)
}

// Check reports what is wrong with o, if anything.
func (o *Options) Check() error {
	switch {
	case (o.Requests > 0) == (o.Duration > 0):
		return errors.New("set either a number of requests or a duration")
	case o.Requests < 0 || o.Duration < 0:
		return errors.New("the number of requests and the duration must be positive")
	case (o.Concurrency > 0) == (o.Rate > 0):
		return errors.New("set either a concurrency or a rate")
	case o.Concurrency < 0 || o.Rate < 0 || o.Rate > 1e6:
		return errors.New("the concurrency must be positive, the rate positive and at most a million per second")
	case !(o.AbortRatio >= 0 && o.AbortRatio <= 1):
		return fmt.Errorf("abort ratio %g is outside 0..1", o.AbortRatio)
	case o.AbortMode < AbortBoth || o.AbortMode > AbortHangUp:
		return fmt.Errorf("unknown abort mode %d", o.AbortMode)
	case o.ReuseIDs < 0 || o.Timeout < 0 || o.LeakWait < 0:
		return errors.New("the id pool, the timeout and the leak wait must not be negative")
	}
	for i, t := range o.Texts {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("text %d is empty", i)
		}
	}
	return nil
}

// Outcome is how a request ended.
type Outcome int

// The outcomes.
const (
	OK      Outcome = iota // its stream ended cleanly, with audio
	Aborted                // the run aborted it, as asked
	Failed                 // it failed: Result.Code says how
)

// Result is one request's measurements.
type Result struct {
	// Index is the request's number in the run, from 0.
	Index   int
	ID      string
	Outcome Outcome
	// Code classifies a failure (see the package documentation); Msg is
	// its message.
	Code, Msg string
	// Start is when the request was due (at a fixed rate) or sent, End
	// when it ended.
	Start, End time.Time
	// TTFA is the time from Start to the first audio; 0 when none came.
	TTFA time.Duration
	// Samples is the audio received, at Rate samples per second.
	Samples, Rate int
	// Underruns counts the times the stream fell behind a listener who
	// plays it from its first audio on, in real time, with no buffer of
	// its own; Stall is the silence they heard in all.
	Underruns int
	Stall     time.Duration
}

// Latency is the time from the request's start to its end.
func (r Result) Latency() time.Duration { return r.End.Sub(r.Start) }

// AudioSeconds is the length of the audio received.
func (r Result) AudioSeconds() float64 {
	if r.Rate == 0 {
		return 0
	}
	return float64(r.Samples) / float64(r.Rate)
}

// Run sends the requests opts describes to d, waits for them to end,
// checks that d's system goes back to rest, and reports. Cancelling ctx
// stops the run early: requests in flight are cut short and count as
// interrupted errors, and the leak check still runs. Run's error is for
// options it cannot run.
func Run(ctx context.Context, d Driver, opts Options) (*Report, error) {
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	if opts.Texts == nil {
		opts.Texts = DefaultTexts
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LeakWait == 0 {
		opts.LeakWait = DefaultLeakWait
	}
	r := &runner{d: d, opts: opts, run: ctx, prefix: "bench-" + randomHex(4) + "-"}
	r.expect.byText = map[int]int{}
	if opts.ReuseIDs > 0 {
		r.ids = make(chan string, opts.ReuseIDs)
		for k := range opts.ReuseIDs {
			r.ids <- r.prefix + "r" + strconv.Itoa(k)
		}
	}
	start := time.Now()
	if opts.Rate > 0 {
		r.paced(pacer{start: start, rate: opts.Rate, n: opts.Requests, dur: opts.Duration})
	} else {
		r.closedLoop(start)
	}
	rep := newReport(start, r.results)
	rep.Leaks = CheckLeaks(context.WithoutCancel(ctx), d, opts.LeakWait)
	return rep, nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

type runner struct {
	d      Driver
	opts   Options
	run    context.Context
	prefix string
	ids    chan string // the id pool, when ids are reused
	fresh  atomic.Int64
	expect expectations

	mu      sync.Mutex
	results []Result
}

// closedLoop runs the requests on Concurrency workers.
func (r *runner) closedLoop(start time.Time) {
	var next atomic.Int64
	end := start.Add(r.opts.Duration)
	var wg sync.WaitGroup
	for range r.opts.Concurrency {
		wg.Go(func() {
			for r.run.Err() == nil {
				if r.opts.Requests == 0 && !time.Now().Before(end) {
					return
				}
				i := int(next.Add(1) - 1)
				if r.opts.Requests > 0 && i >= r.opts.Requests {
					return
				}
				r.do(i, time.Time{})
			}
		})
	}
	wg.Wait()
}

// paced starts the requests as p schedules them, each on its own
// goroutine, at most MaxOutstanding at once.
func (r *runner) paced(p pacer) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, MaxOutstanding)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for i := 0; ; i++ {
		due, ok := p.at(i)
		if !ok || waitUntil(r.run, timer, due) != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		case <-r.run.Done():
		}
		if r.run.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			r.do(i, due)
		})
	}
	wg.Wait()
}

// plan is what the run does to one request beyond sending it.
type plan struct {
	abort  bool
	frac   float64 // of the expected audio, where to abort
	delete bool    // abort by DELETE, not by hanging up only
}

// planFor draws request i's plan from a source seeded with the run's seed
// and i, so that it does not depend on the order requests start in.
func planFor(seed uint64, i int, ratio float64, mode AbortMode) plan {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	p := plan{abort: rng.Float64() < ratio, frac: rng.Float64()}
	switch mode {
	case AbortDelete:
		p.delete = true
	case AbortBoth:
		p.delete = rng.IntN(2) == 0
	}
	return p
}

// do runs request i, due at due (zero: now), and records its result.
func (r *runner) do(i int, due time.Time) {
	id, ok := r.takeID()
	if !ok {
		return // the run was cancelled before the request could start
	}
	if due.IsZero() {
		due = time.Now()
	}
	res, ended := r.send(i, id, due)
	res.End = time.Now()
	r.record(res)
	r.releaseID(id, ended)
}

// send sends request i and follows it to its end. ended reports whether
// the server is known to have let go of its id.
func (r *runner) send(i int, id string, start time.Time) (res Result, ended bool) {
	res = Result{Index: i, ID: id, Start: start}
	ti := i % len(r.opts.Texts)
	text := r.opts.Texts[ti]
	p := planFor(r.opts.Seed, i, r.opts.AbortRatio, r.opts.AbortMode)
	ctx, cancel := context.WithTimeout(r.run, r.opts.Timeout)
	defer cancel()
	fail := func(err error) (Result, bool) {
		res.Outcome, res.Code, res.Msg = Failed, codeOf(r.run, ctx, err), err.Error()
		if e := (*Error)(nil); errors.As(err, &e) {
			res.Msg = e.Msg
		}
		return res, false
	}
	st, err := r.d.Start(ctx, id, text)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	target := int(p.frac * float64(r.expect.of(ti, text)))
	var play playback
	defer func() { res.Underruns, res.Stall = play.underruns, play.stall }()
	for {
		n, rate, err := st.Next(ctx)
		switch {
		case errors.Is(err, io.EOF) && res.Samples == 0:
			return fail(&Error{Code: CodeBadResponse, Msg: "the stream ended without audio"})
		case errors.Is(err, io.EOF):
			res.Outcome = OK
			r.expect.learn(ti, text, res.Samples)
			return res, true
		case err != nil:
			return fail(err)
		case n == 0:
			continue
		}
		now := time.Now()
		if res.Samples == 0 {
			res.TTFA = now.Sub(start)
			res.Rate = rate
		}
		play.add(now, n, rate)
		res.Samples += n
		if !p.abort || res.Samples < target {
			continue
		}
		if p.delete {
			if err := r.d.Abort(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
				return fail(fmt.Errorf("DELETE: %w", err))
			}
			ended = true
		}
		res.Outcome = Aborted
		return res, ended
	}
}

func (r *runner) record(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	if r.opts.OnResult != nil {
		r.opts.OnResult(res)
	}
}

// takeID returns the id of the next request: a new one, or one from the
// pool once one is free. It returns false if the run is cancelled first.
func (r *runner) takeID() (string, bool) {
	if r.ids == nil {
		return r.prefix + strconv.FormatInt(r.fresh.Add(1), 10), true
	}
	select {
	case id := <-r.ids:
		return id, true
	case <-r.run.Done():
		return "", false
	}
}

// idPoll is how often releaseID asks whether the server still holds an id.
const idPoll = 5 * time.Millisecond

// releaseID gives a pooled id back once the server has let go of it
// (ended: known to have). An id still held after the request timeout is
// replaced by a new one: the leak check will show what holds it.
func (r *runner) releaseID(id string, ended bool) {
	if r.ids == nil {
		return
	}
	if !ended && !r.waitFree(id) {
		id = r.prefix + "r" + strconv.FormatInt(r.fresh.Add(1), 10) + "x"
	}
	r.ids <- id
}

// waitFree polls until the server no longer holds id, and reports whether
// that happened within the request timeout.
func (r *runner) waitFree(id string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.run), r.opts.Timeout)
	defer cancel()
	tick := time.NewTicker(idPoll)
	defer tick.Stop()
	for {
		held, err := r.d.Held(ctx, id)
		if err == nil && !held {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// expectations remember how much audio texts gave, to place abort points.
type expectations struct {
	mu      sync.Mutex
	byText  map[int]int // samples of the last complete stream of each text
	samples int         // over every complete stream
	chars   int
}

// of returns the samples text ti is expected to give: what it gave last
// time, else its length at the samples per character seen so far, else 0.
func (e *expectations) of(ti int, text string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.byText[ti]; ok {
		return n
	}
	if e.chars == 0 {
		return 0
	}
	return int(float64(e.samples) / float64(e.chars) * float64(utf8.RuneCountInString(text)))
}

func (e *expectations) learn(ti int, text string, samples int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byText[ti] = samples
	e.samples += samples
	e.chars += utf8.RuneCountInString(text)
}
