package loadgen

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeDriver is a system under load in memory. A request of a text with n
// words streams n chunks of 100 samples; the text "fail" is refused with
// code overloaded, "break" fails after its first chunk, and "hang" sends
// one chunk and then nothing until its context ends. A request that is
// hung up on drains: its id stays held for two more Held or Leaks calls.
type fakeDriver struct {
	mu       sync.Mutex
	held     map[string]int // id -> Held calls left before it is let go (-1: running)
	reuses   int            // Starts with an id still held
	deletes  int
	hangups  int
	started  chan struct{} // gets a value per Start, when not nil
	inflight func() int    // overrides Leaks' count when set
}

func newFake() *fakeDriver { return &fakeDriver{held: map[string]int{}} }

func (d *fakeDriver) Start(ctx context.Context, id, text string) (Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started != nil {
		d.started <- struct{}{}
	}
	if _, ok := d.held[id]; ok {
		d.reuses++
		return nil, &Error{Code: "conflict", Msg: "id " + id + " in use"}
	}
	if text == "fail" {
		return nil, &Error{Code: "overloaded", Msg: "busy"}
	}
	d.held[id] = -1
	return &fakeStream{d: d, id: id, text: text, left: len(strings.Fields(text))}, nil
}

type fakeStream struct {
	d          *fakeDriver
	id, text   string
	left, sent int
	done       bool
}

func (s *fakeStream) Next(ctx context.Context) (int, int, error) {
	switch {
	case s.done:
		return 0, 0, io.EOF
	case s.text == "break" && s.sent == 1:
		s.end()
		return 0, 0, errors.New("connection reset")
	case s.text == "hang" && s.sent == 1:
		<-ctx.Done()
		s.end()
		return 0, 0, ctx.Err()
	case s.left == 0:
		s.end()
		return 0, 0, io.EOF
	}
	s.left--
	s.sent++
	return 100, 16000, nil
}

// end ends the stream by itself: the server lets go of its id at once.
func (s *fakeStream) end() {
	s.done = true
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.held[s.id] == -1 {
		delete(s.d.held, s.id)
	}
}

// Close hangs up on a stream still running: the server lets go of its id
// two Held or Leaks calls later, as if it took time to drain.
func (s *fakeStream) Close() {
	if s.done {
		return
	}
	s.done = true
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.d.held[s.id] == -1 {
		s.d.hangups++
		s.d.held[s.id] = 2
	}
}

func (d *fakeDriver) Abort(ctx context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.held[id]; !ok {
		return ErrNotFound
	}
	d.deletes++
	delete(d.held, id)
	return nil
}

// drain moves every hung-up request one step closer to its end.
func (d *fakeDriver) drain() {
	for id, n := range d.held {
		switch {
		case n > 1:
			d.held[id] = n - 1
		case n == 1:
			delete(d.held, id)
		}
	}
}

func (d *fakeDriver) Held(ctx context.Context, id string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, held := d.held[id]
	d.drain()
	return held, nil
}

func (d *fakeDriver) Leaks(ctx context.Context) (Leaks, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.held)
	d.drain()
	if d.inflight != nil {
		n = d.inflight()
	}
	return Leaks{InFlight: n, Bindings: 2 * n, ByStage: map[string]int{"0": n, "1": n}}, nil
}

func TestRunCountsAndAborts(t *testing.T) {
	for _, reuse := range []int{0, 3} {
		d := newFake()
		var calls int
		opts := Options{
			Requests: 200, Concurrency: 8, AbortRatio: 0.5, ReuseIDs: reuse, Seed: 3,
			Texts:    []string{"one two three four", "five six", "seven eight nine"},
			OnResult: func(Result) { calls++ },
		}
		rep, err := Run(context.Background(), d, opts)
		if err != nil {
			t.Fatal(err)
		}
		planned := 0
		for i := range opts.Requests {
			if planFor(opts.Seed, i, opts.AbortRatio, opts.AbortMode).abort {
				planned++
			}
		}
		// Every planned abort lands before its stream ends: the first of
		// each text at its first audio, the others before the audio the
		// text gave in full.
		if rep.Requests != 200 || rep.OK != 200-planned || rep.Aborted != planned || len(rep.Errors) != 0 || calls != 200 {
			t.Errorf("reuse %d: %d requests, %d ok, %d aborted (%d planned), errors %v, %d results reported", reuse, rep.Requests, rep.OK, rep.Aborted, planned, rep.Errors, calls)
		}
		if d.deletes+d.hangups != planned || d.deletes < planned/4 || d.hangups < planned/4 {
			t.Errorf("reuse %d: %d deletes and %d hang-ups for %d aborts", reuse, d.deletes, d.hangups, planned)
		}
		if d.reuses != 0 {
			t.Errorf("reuse %d: %d requests reused an id the server still held", reuse, d.reuses)
		}
		if !rep.Leaks.OK || rep.Failed() {
			t.Errorf("reuse %d: leaks %+v, failed %v", reuse, rep.Leaks, rep.Failed())
		}
		// 100 samples at 16 kHz per chunk.
		if rep.AudioSeconds <= 0 || rep.LatencyMs.P50 > rep.LatencyMs.P90 || rep.TTFAMs.P99 > rep.TTFAMs.Max {
			t.Errorf("reuse %d: %+v", reuse, rep)
		}
	}
}

func TestRunErrors(t *testing.T) {
	d := newFake()
	rep, err := Run(context.Background(), d, Options{
		Requests: 8, Concurrency: 2, Timeout: 50 * time.Millisecond,
		Texts: []string{"fail", "break", "hang", "fine words"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"overloaded": 2, CodeTransport: 2, CodeTimeout: 2}
	if rep.OK != 2 || len(rep.Errors) != len(want) || !rep.Failed() {
		t.Errorf("ok %d, errors %v, failed %v; want 2 ok and %v", rep.OK, rep.Errors, rep.Failed(), want)
	}
	for code, n := range want {
		if rep.Errors[code] != n {
			t.Errorf("errors[%s] = %d, want %d", code, rep.Errors[code], n)
		}
	}
	if rep.Examples["overloaded"] != "busy" {
		t.Errorf("example %q", rep.Examples["overloaded"])
	}
}

func TestRunAtRate(t *testing.T) {
	d := newFake()
	rep, err := Run(context.Background(), d, Options{Requests: 20, Rate: 2000, AbortRatio: 0.2, AbortMode: AbortDelete})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 20 || rep.OK+rep.Aborted != 20 || d.hangups != 0 || d.deletes != rep.Aborted {
		t.Errorf("%d requests, %d ok, %d aborted, %d deletes, %d hang-ups", rep.Requests, rep.OK, rep.Aborted, d.deletes, d.hangups)
	}
}

func TestRunForADuration(t *testing.T) {
	d := newFake()
	rep, err := Run(context.Background(), d, Options{Duration: 20 * time.Millisecond, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.OK != rep.Requests {
		t.Errorf("%d requests, %d ok", rep.Requests, rep.OK)
	}
}

func TestRunInterrupted(t *testing.T) {
	d := newFake()
	d.started = make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-d.started
		<-d.started
		cancel()
	}()
	rep, err := Run(ctx, d, Options{Requests: 100, Concurrency: 2, Texts: []string{"hang"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests < 2 || rep.Errors[CodeInterrupted] != rep.Requests {
		t.Errorf("%d requests, errors %v; want every request interrupted", rep.Requests, rep.Errors)
	}
	if !rep.Leaks.OK {
		t.Errorf("leak check after an interrupted run: %+v", rep.Leaks)
	}
}

func TestOptionsCheck(t *testing.T) {
	good := Options{Requests: 1, Concurrency: 1}
	cases := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"neither count nor duration", func(o *Options) { o.Requests = 0 }, "either a number of requests or a duration"},
		{"both count and duration", func(o *Options) { o.Duration = time.Second }, "either a number of requests or a duration"},
		{"both concurrency and rate", func(o *Options) { o.Rate = 1 }, "either a concurrency or a rate"},
		{"negative concurrency", func(o *Options) { o.Concurrency = -1 }, "either a concurrency or a rate"},
		{"ratio above 1", func(o *Options) { o.AbortRatio = 1.5 }, "outside 0..1"},
		{"empty text", func(o *Options) { o.Texts = []string{"a", " "} }, "text 1 is empty"},
		{"negative pool", func(o *Options) { o.ReuseIDs = -1 }, "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			if err := o.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want %q", err, tc.want)
			}
		})
	}
	if err := good.Check(); err != nil {
		t.Errorf("good options: %v", err)
	}
}

func TestParseAbortMode(t *testing.T) {
	for _, m := range []AbortMode{AbortBoth, AbortDelete, AbortHangUp} {
		if got, err := ParseAbortMode(m.String()); err != nil || got != m {
			t.Errorf("ParseAbortMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseAbortMode("maybe"); err == nil || !strings.Contains(err.Error(), "both, delete, hangup") {
		t.Errorf("ParseAbortMode(maybe) = %v", err)
	}
}

func TestCheckLeaks(t *testing.T) {
	d := newFake()
	reads := 0
	d.inflight = func() int {
		reads++
		return max(3-reads, 0)
	}
	if l := CheckLeaks(context.Background(), d, time.Minute); !l.OK || l.InFlight != 0 || reads != 3 {
		t.Errorf("a system that comes to rest on the third read: %+v after %d reads", l, reads)
	}
	d.inflight = func() int { return 2 }
	l := CheckLeaks(context.Background(), d, 50*time.Millisecond)
	if l.OK || l.InFlight != 2 || l.Bindings != 4 || !strings.Contains(l.Error, "still held") {
		t.Errorf("a system that holds requests: %+v", l)
	}
	if want := "2 requests in flight, 4 bindings (stage 0: 2, stage 1: 2)"; l.String() != want {
		t.Errorf("String() = %q, want %q", l.String(), want)
	}
}

func TestParseMetrics(t *testing.T) {
	const text = `# HELP omnistage_requests_inflight Requests admitted and not yet ended (draining ones included).
# TYPE omnistage_requests_inflight gauge
omnistage_requests_inflight 3
# HELP omnistage_stage_bindings Requests bound to a replica of the stage.
# TYPE omnistage_stage_bindings gauge
omnistage_stage_bindings{stage="0"} 2
omnistage_stage_bindings{stage="1"} 1
omnistage_stage_bindings{stage="2"} 0
# TYPE go_goroutines gauge
go_goroutines 42
`
	l, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if l.InFlight != 3 || l.Bindings != 3 || l.ByStage["0"] != 2 || l.ByStage["1"] != 1 || l.ByStage["2"] != 0 || len(l.ByStage) != 3 {
		t.Errorf("ParseMetrics = %+v", l)
	}
	for _, bad := range []string{"go_goroutines 42\n", "omnistage_requests_inflight 0\n", "omnistage_requests_inflight{\n"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) did not fail", bad)
		}
	}
}

func TestReadTexts(t *testing.T) {
	texts, err := ReadTexts(strings.NewReader("  Hello there.  \n\n\tSecond line\r\nthird\n"))
	if err != nil || len(texts) != 3 || texts[0] != "Hello there." || texts[1] != "Second line" || texts[2] != "third" {
		t.Errorf("ReadTexts = %q, %v", texts, err)
	}
	if _, err := ReadTexts(strings.NewReader("\n \n")); err == nil {
		t.Error("a file of blank lines gave texts")
	}
	if _, err := ReadTexts(strings.NewReader("a\n" + strings.Repeat("x", MaxTextLen+1))); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a long line: %v", err)
	}
	if len(DefaultTexts) < 12 {
		t.Errorf("%d default texts", len(DefaultTexts))
	}
}
