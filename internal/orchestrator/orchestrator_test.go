package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

func TestRoutes(t *testing.T) {
	cases := []struct {
		name        string
		transitions string
		modalities  []string
		want        []string
		skipped     []string
	}{
		{name: "sequential", want: []string{"2:hi|talker.0|vocoder.0|post.0"}},
		{name: "skip", transitions: "  stage_transitions: [[0, 2]]", want: []string{"2:hi|talker.0|post.0"}, skipped: []string{"vocoder"}},
		{name: "reorder", transitions: "  stage_transitions: [[0, 2], [2, 1]]", want: []string{"1:hi|talker.0|post.0|vocoder.0"}},
		{name: "alone", transitions: "  stage_transitions: []", want: []string{"0:hi|talker.0"}, skipped: []string{"vocoder", "post"}},
		{name: "timestamps", transitions: "  stage_transitions: [[0, 2]]", modalities: []string{"audio", "timestamps"},
			want: []string{"2:hi|talker.0|post.0", "3:hi|talker.0|post.0|aligner.0"}, skipped: []string{"vocoder"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, setup{transitions: tc.transitions})
			s, err := f.o.Submit(context.Background(), Request{ID: "r1", Prompt: engine.Prompt{Text: "hi"}, Modalities: tc.modalities})
			if err != nil {
				t.Fatal(err)
			}
			outs, err := collect(t, s)
			if err != nil {
				t.Fatal(err)
			}
			// Two stages' outputs may come in either order: a stage hands
			// its chunk downstream before it answers with it, and the
			// aligner may answer first.
			slices.SortStableFunc(outs, func(a, b OutputChunk) int { return a.Stage - b.Stage })
			if got := texts(outs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("outputs = %q, want %q", got, tc.want)
			}
			for i, o := range outs {
				if o.Final != (i == len(outs)-1) {
					t.Errorf("output %d final = %v", i, o.Final)
				}
			}
			for _, name := range tc.skipped {
				if n := f.rec.callsOf(name); n != 0 {
					t.Errorf("skipped stage %s was called %d times", name, n)
				}
			}
			// Every stage, skipped ones and the aligner included, warmed up.
			for _, id := range []string{"talker/0", "vocoder/0", "post/0", "aligner/0"} {
				if f.rec.warmed[id] != 1 {
					t.Errorf("replica %s warmed %d times, want 1", id, f.rec.warmed[id])
				}
			}
			f.assertIdle()
		})
	}
}

func TestAudioOnlyDoesNotRunAligner(t *testing.T) {
	f := newFixture(t, setup{})
	for _, m := range [][]string{nil, {"audio"}} {
		s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "x"}, Modalities: m})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.rec.callsOf("aligner"); n != 0 {
		t.Errorf("aligner called %d times for audio-only requests", n)
	}
}

func TestPrewarmOrder(t *testing.T) {
	f := newFixture(t, setup{
		transitions: "  stage_transitions: [[0, 2], [2, 1]]",
		deploy:      "  stages:\n    - {id: 0, replicas: 3}\n    - {id: 1, replicas: 2}\n    - {id: 2, replicas: 2}",
	})
	var streams []*Stream
	for i := range 4 {
		s, err := f.o.Submit(context.Background(), Request{ID: fmt.Sprint("p", i), Prompt: engine.Prompt{Text: "x"}, Modalities: []string{"timestamps"}})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	for _, s := range streams {
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
	}
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	// Each receiver was prepared naming the replica its producer was bound
	// to, in route order.
	byReq := map[string][]string{}
	for _, p := range f.rec.prepares {
		req, rest, _ := strings.Cut(p, ":")
		byReq[req] = append(byReq[req], rest)
	}
	for i := range 4 {
		id := fmt.Sprint("p", i)
		reps := f.rec.replicas[id]
		want := []string{
			fmt.Sprintf("2<-%s", reps[0]),
			fmt.Sprintf("1<-%s", reps[2]),
			fmt.Sprintf("3<-%s", reps[1]),
		}
		if fmt.Sprint(byReq[id]) != fmt.Sprint(want) {
			t.Errorf("request %s prepares = %v, want %v", id, byReq[id], want)
		}
	}
}

func TestPrewarmSeesBoundProducer(t *testing.T) {
	var f *fixture
	f = newFixture(t, setup{hooks: testengine.Hooks{
		Prepare: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			// When a receiver is prepared, its producer already holds a binding.
			st := f.o.Stats()
			if st.Stages[job.StageID-1].Bindings != 1 || st.Stages[job.StageID].Bindings != 1 {
				return fmt.Errorf("at prepare of stage %d, bindings = %+v", job.StageID, st.Stages)
			}
			return nil
		},
	}})
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
}

func TestCompletionWaitsForAllOutputs(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, setup{hooks: testengine.Hooks{
		Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "aligner" {
				<-release
			}
			return nil
		},
	}})
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "a b"}, Modalities: []string{"audio", "timestamps"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Recv(context.Background())
	if err != nil || out.Stage != 2 || out.Final {
		t.Fatalf("first output = %+v, %v; want the unfinished audio of stage 2", out, err)
	}
	select {
	case <-s.Done():
		t.Fatal("request ended while the aligner was still running")
	default:
	}
	close(release)
	rest, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 1 || rest[0].Stage != 3 || !rest[0].Final {
		t.Fatalf("rest = %+v", rest)
	}
	f.assertIdle()
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, setup{transitions: "  stage_transitions: [[0, 2]]"})
	cases := []struct {
		req  Request
		want string
	}{
		{Request{Modalities: []string{"video"}}, `unknown output modality "video"`},
		{Request{Params: []json.RawMessage{nil}}, "sampling_params has 1 entries"},
		{Request{Params: []json.RawMessage{nil, nil, nil, nil, nil}}, "only 4 stage ids"},
		{Request{Params: []json.RawMessage{nil, nil, json.RawMessage(`{"bogus": 1}`)}}, `sampling_params[2]: stage 2 (post): invalid sampling params: bogus: unknown field; this stage takes only tag and fail`},
		{Request{ID: "has space"}, "printable characters without spaces"},
		{Request{ID: strings.Repeat("x", 200)}, "the limit is 128"},
	}
	for _, tc := range cases {
		_, err := f.o.Submit(context.Background(), tc.req)
		codeIs(t, err, CodeBadRequest)
		contains(t, err, tc.want)
	}
	// A stage that refuses its input fails the request with a bad-request code.
	s, err := f.o.Submit(context.Background(), Request{Params: []json.RawMessage{nil, nil, json.RawMessage(`{"fail": true}`)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, s)
	codeIs(t, err, CodeBadRequest)
	contains(t, err, "stage 2 (post): invalid input")
	f.assertIdle()
}

func TestOverload(t *testing.T) {
	block := make(chan struct{})
	f := newFixture(t, setup{
		deploy: "  max_inflight: 3\n  stages:\n    - {id: 0, max_inflight: 1, max_queue: 1}",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "talker" {
				select {
				case <-block:
				case <-ctx.Done():
				}
			}
			return nil
		}},
	})
	s1, err := f.o.Submit(context.Background(), Request{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// The second waits in stage 0's queue; the third finds the queue full.
	done2 := make(chan error, 1)
	go func() {
		s, err := f.o.Submit(context.Background(), Request{ID: "b"})
		if err == nil {
			_, err = collect(t, s)
		}
		done2 <- err
	}()
	testkit.Eventually(t, "a queued request", func() bool { return f.o.Stats().Stages[0].Queued == 1 })
	_, err = f.o.Submit(context.Background(), Request{ID: "c"})
	codeIs(t, err, CodeOverloaded)
	contains(t, err, "stage 0 (talker) is busy")
	// Global limit: a, b and c's successor fill it.
	close(block)
	if _, err := collect(t, s1); err != nil {
		t.Fatal(err)
	}
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(f.o.metrics.requests.WithLabelValues("overloaded")); got != 1 {
		t.Errorf("overloaded count = %v", got)
	}
	f.assertIdle()
}

func TestGlobalInflightLimit(t *testing.T) {
	block := make(chan struct{})
	f := newFixture(t, setup{
		deploy: "  max_inflight: 2",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			<-block
			return nil
		}},
	})
	var streams []*Stream
	for i := range 2 {
		s, err := f.o.Submit(context.Background(), Request{ID: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	_, err := f.o.Submit(context.Background(), Request{ID: "x"})
	codeIs(t, err, CodeOverloaded)
	contains(t, err, "2 requests in flight, the limit is 2")
	close(block)
	for _, s := range streams {
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
	}
	f.assertIdle()
}

func TestBackPressure(t *testing.T) {
	var consumed, maxAhead atomic.Int64
	const bound = 16 // 3 edges of stream_buffer 2, the output buffer, and a chunk in each stage's hands
	f := newFixture(t, setup{
		deploy: "  stream_buffer: 2\n  stages:\n    - {id: 0, options: {split: true}}",
		hooks: testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
			if e.Spec.Name == "talker" {
				ahead := int64(n) - consumed.Load()
				for {
					m := maxAhead.Load()
					if ahead <= m || maxAhead.CompareAndSwap(m, ahead) {
						break
					}
				}
			}
			return nil
		}},
	})
	words := strings.Repeat("w ", 500)
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: words}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := s.Recv(context.Background())
		if err != nil {
			break
		}
		n++
		consumed.Store(int64(n))
		if n%50 == 0 {
			time.Sleep(time.Millisecond) // a slow reader now and then
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 500 {
		t.Fatalf("got %d chunks, want 500", n)
	}
	if m := maxAhead.Load(); m > bound {
		t.Errorf("producer ran %d chunks ahead of the reader; buffers bound it to %d", m, bound)
	}
}

func TestChunkOrder(t *testing.T) {
	f := newFixture(t, setup{deploy: "  stream_buffer: 1\n  stages:\n    - {id: 0, options: {split: true}}\n    - {id: 1, options: {chunks: 2}}"})
	var words []string
	for i := range 200 {
		words = append(words, fmt.Sprint(i))
	}
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: strings.Join(words, " ")}})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 400 {
		t.Fatalf("got %d outputs", len(outs))
	}
	for i, o := range outs {
		want := fmt.Sprintf("%d|talker|vocoder.%d|post.0", i/2, i%2)
		if o.Chunk.Text.Text != want {
			t.Fatalf("output %d = %q, want %q", i, o.Chunk.Text.Text, want)
		}
	}
}

func TestAbortWhileQueued(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	f := newFixture(t, setup{
		deploy: "  stages:\n    - {id: 0, max_inflight: 1}",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if job.RequestID == "first" {
				select {
				case <-block:
				case <-ctx.Done():
				}
			}
			return nil
		}},
	})
	first, err := f.o.Submit(context.Background(), Request{ID: "first"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := f.o.Submit(context.Background(), Request{ID: "queued"})
		errc <- err
	}()
	testkit.Eventually(t, "queued request", func() bool { return f.o.Stats().Stages[0].Queued == 1 })
	if err := f.o.Abort(context.Background(), "queued"); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	codeIs(t, err, CodeAborted)
	if _, ok := f.o.Lookup("queued"); ok {
		t.Error("aborted id still held")
	}
	if f.o.Stats().Stages[0].Queued != 0 {
		t.Error("queue not emptied")
	}
	first.Close()
	f.assertIdle()
}

func TestAbortDuringPrewarm(t *testing.T) {
	f := newFixture(t, setup{hooks: testengine.Hooks{
		Prepare: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			<-ctx.Done()
			return ctx.Err()
		},
	}})
	errc := make(chan error, 1)
	go func() {
		_, err := f.o.Submit(context.Background(), Request{ID: "warm"})
		errc <- err
	}()
	testkit.Eventually(t, "prepare", func() bool {
		f.rec.mu.Lock()
		defer f.rec.mu.Unlock()
		return len(f.rec.prepares) == 1
	})
	if err := f.o.Abort(context.Background(), "warm"); err != nil {
		t.Fatal(err)
	}
	codeIs(t, <-errc, CodeAborted)
	f.assertIdle()
}

func TestAbortMidStream(t *testing.T) {
	f := newFixture(t, setup{deploy: "  stages:\n    - {id: 0, options: {split: true}}"})
	s, err := f.o.Submit(context.Background(), Request{ID: "mid", Prompt: engine.Prompt{Text: strings.Repeat("w ", 10000)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two aborts at once: the second joins the first.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.o.Abort(context.Background(), "mid"); err != nil && CodeOf(err) != CodeNotFound {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	_, err = collect(t, s)
	codeIs(t, err, CodeAborted)
	f.assertIdle()
	err = f.o.Abort(context.Background(), "mid")
	codeIs(t, err, CodeNotFound)
}

func TestClientGoneAborts(t *testing.T) {
	f := newFixture(t, setup{deploy: "  stages:\n    - {id: 0, options: {split: true}}"})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := f.o.Submit(ctx, Request{ID: "gone", Prompt: engine.Prompt{Text: strings.Repeat("w ", 10000)}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	err = s.Err()
	codeIs(t, err, CodeAborted)
	contains(t, err, "client went away")
	f.assertIdle()
}

func TestAbortFailedHoldsID(t *testing.T) {
	stuck := make(chan struct{})
	f := newFixture(t, setup{
		abortAfter: "20ms",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if job.RequestID == "stuck" && e.Spec.Name == "vocoder" {
				<-stuck // ignores cancellation, like a C call that must finish
			}
			return nil
		}},
	})
	s, err := f.o.Submit(context.Background(), Request{ID: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "vocoder running", func() bool { return f.rec.callsOf("vocoder") == 1 })
	err = f.o.Abort(context.Background(), "stuck")
	codeIs(t, err, CodeAbortFailed)
	if st, ok := f.o.Lookup("stuck"); !ok || st != StateAbortFailed {
		t.Fatalf("state = %v, %v; want abort_failed", st, ok)
	}
	if f.o.Stats().Draining != 1 {
		t.Error("draining request not counted")
	}
	_, err = f.o.Submit(context.Background(), Request{ID: "stuck"})
	codeIs(t, err, CodeConflict)
	contains(t, err, "abort_failed")
	// A second abort joins and fails the same way while the drain goes on.
	codeIs(t, f.o.Abort(context.Background(), "stuck"), CodeAbortFailed)
	close(stuck)
	codeIs(t, s.Err(), CodeAborted)
	if _, ok := f.o.Lookup("stuck"); ok {
		t.Fatal("id still held after the drain")
	}
	s2, err := f.o.Submit(context.Background(), Request{ID: "stuck", Prompt: engine.Prompt{Text: "again"}})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := collect(t, s2)
	if err != nil || len(outs) != 1 || !strings.HasPrefix(outs[0].Chunk.Text.Text, "again|") {
		t.Fatalf("reused id outputs = %v, %v", texts(outs), err)
	}
	if got := testutil.ToFloat64(f.o.metrics.aborts.WithLabelValues("abort_failed")); got != 2 {
		t.Errorf("abort_failed count = %v", got)
	}
	f.assertIdle()
}

func TestConflictWhileActive(t *testing.T) {
	block := make(chan struct{})
	f := newFixture(t, setup{hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		<-block
		return nil
	}}})
	s, err := f.o.Submit(context.Background(), Request{ID: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.o.Submit(context.Background(), Request{ID: "dup"})
	codeIs(t, err, CodeConflict)
	contains(t, err, `"dup" is still in use (active)`)
	close(block)
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
}

// TestAbortReuseStress aborts and reuses a few ids thousands of times with
// random timing and checks that every output belongs to its own request.
func TestAbortReuseStress(t *testing.T) {
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	f := newFixture(t, setup{deploy: "  max_inflight: 64\n  stream_buffer: 2\n  stages:\n    - {id: 0, replicas: 2, max_inflight: 8, options: {split: true}}\n    - {id: 1, replicas: 2, max_inflight: 8}\n    - {id: 2, max_inflight: 16}"})
	// Each worker reuses its own two ids at once after an abort, while the
	// abort may still be draining; a stale abort may also hit the id's next
	// request, which is what abort by id means.
	const workers = 8
	var wg sync.WaitGroup
	var completed, aborted, conflicts atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := w; i < iterations; i += workers {
				id := fmt.Sprintf("id-%d-%d", w, rng.IntN(2))
				input := fmt.Sprintf("in%d", i)
				words := strings.TrimSpace(strings.Repeat(input+" ", 1+rng.IntN(20)))
				var s *Stream
				var err error
				for {
					s, err = f.o.Submit(context.Background(), Request{ID: id, Prompt: engine.Prompt{Text: words}})
					if CodeOf(err) != CodeConflict {
						break
					}
					conflicts.Add(1)
					runtime.Gosched()
				}
				if err != nil {
					if CodeOf(err) == CodeAborted {
						aborted.Add(1)
						continue
					}
					t.Errorf("submit %s: %v", id, err)
					return
				}
				abortAt := rng.IntN(25) // past the chunk count: no abort
				n := 0
				for {
					if n == abortAt {
						go f.o.Abort(context.Background(), id)
						// Reuse the id at once: refused while the old request
						// drains, clean once it has ended.
						reuse := input + "r"
						s2, err := f.o.Submit(context.Background(), Request{ID: id, Prompt: engine.Prompt{Text: reuse}})
						switch {
						case CodeOf(err) == CodeConflict:
							conflicts.Add(1)
						case err == nil:
							outs, err := collect(t, s2)
							if err != nil && CodeOf(err) != CodeAborted {
								t.Errorf("reused %s: %v", id, err)
							}
							for _, o := range outs {
								if !strings.HasPrefix(o.Chunk.Text.Text, reuse+"|") {
									t.Errorf("reused id %s got %q", id, o.Chunk.Text.Text)
								}
							}
						case CodeOf(err) != CodeAborted:
							t.Errorf("reuse %s: %v", id, err)
						}
					}
					out, err := s.Recv(context.Background())
					if err != nil {
						if CodeOf(err) == CodeAborted {
							aborted.Add(1)
						} else if !errors.Is(err, io.EOF) {
							t.Errorf("request %s: %v", id, err)
						} else {
							completed.Add(1)
						}
						break
					}
					if got := out.Chunk.Text.Text; !strings.HasPrefix(got, input+"|") {
						t.Errorf("request %s (%s) got output %q of another request", id, input, got)
					}
					n++
				}
			}
		}()
	}
	wg.Wait()
	// Aborts launched late may still be draining: wait for quiet.
	testkit.Eventually(t, "idle", func() bool { return f.o.Stats().InFlight == 0 })
	f.assertIdle()
	t.Logf("completed %d, aborted %d, conflicts %d, late events dropped %v", completed.Load(), aborted.Load(), conflicts.Load(),
		testutil.ToFloat64(f.o.metrics.lateDropped))
	if completed.Load() == 0 || aborted.Load() == 0 {
		t.Error("stress did not exercise both completion and abort")
	}
}

// noRestartSoon keeps lost replicas lost for the length of a test.
func noRestartSoon(o *Options) { o.RestartBackoff = time.Hour }

func TestLostReplica(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, setup{
		opts:   noRestartSoon,
		deploy: "  stages:\n    - {id: 1, replicas: 2, max_inflight: 1}",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "vocoder" && strings.HasPrefix(job.RequestID, "hold") {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}},
	})
	a, err := f.o.Submit(context.Background(), Request{ID: "hold-a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.o.Submit(context.Background(), Request{ID: "hold-b"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "both bound", func() bool { return f.rec.callsOf("vocoder") == 2 })
	f.rec.mu.Lock()
	lostID := f.rec.replicas["hold-a"][1]
	victim := f.rec.engines[lostID]
	f.rec.mu.Unlock()
	victim.Lose()

	err = a.Err()
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, fmt.Sprintf("stage 1 (vocoder): replica %s was lost", lostID))
	var rl *ReplicaLostError
	if !errors.As(err, &rl) || rl.Stage != 1 || rl.Replica != lostID {
		t.Fatalf("error = %#v", err)
	}
	// The other request is untouched.
	close(release)
	if _, err := collect(t, b); err != nil {
		t.Fatalf("request on the healthy replica: %v", err)
	}
	// New requests avoid the lost replica.
	for i := range 3 {
		s, err := f.o.Submit(context.Background(), Request{ID: fmt.Sprint("after", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
		f.rec.mu.Lock()
		got := f.rec.replicas[fmt.Sprint("after", i)][1]
		f.rec.mu.Unlock()
		if got == lostID {
			t.Fatalf("request sent to lost replica %s", got)
		}
	}
	// With no healthy replica left the stage refuses work.
	for id, e := range f.rec.engines {
		if strings.HasPrefix(id, "vocoder/") {
			e.Lose()
		}
	}
	testkit.Eventually(t, "no healthy vocoder", func() bool { return f.o.Stats().Stages[1].Healthy == 0 })
	_, err = f.o.Submit(context.Background(), Request{ID: "none"})
	codeIs(t, err, CodeUnavailable)
	contains(t, err, "stage 1 (vocoder) has no healthy replica")
	f.assertIdle()
}

func TestLostReplicaDuringProcess(t *testing.T) {
	// An engine that reports the loss itself, through its error.
	f := newFixture(t, setup{opts: noRestartSoon, hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if e.Spec.Name == "post" {
			return fmt.Errorf("worker exited: %w", engine.ErrReplicaLost)
		}
		return nil
	}}})
	s, err := f.o.Submit(context.Background(), Request{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Err()
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, "stage 2 (post): replica post/0 was lost")
	if f.o.Stats().Stages[2].Healthy != 0 {
		t.Error("replica still healthy")
	}
}

func TestShutdownAbortsInflight(t *testing.T) {
	f := newFixture(t, setup{deploy: "  stages:\n    - {id: 0, options: {split: true}}"})
	s, err := f.o.Submit(context.Background(), Request{ID: "long", Prompt: engine.Prompt{Text: strings.Repeat("w ", 100000)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	// Nobody reads the stream: shutdown's grace period ends and it aborts.
	done := make(chan error, 1)
	go func() { done <- f.o.Shutdown(ctx) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	codeIs(t, s.Err(), CodeUnavailable)
	_, err = f.o.Submit(context.Background(), Request{})
	codeIs(t, err, CodeUnavailable)
}

func TestStageCallRunsOneStage(t *testing.T) {
	f := newFixture(t, setup{transitions: "  stage_transitions: [[0, 2], [2, 1]]"})
	s, err := f.o.SubmitStage(context.Background(), StageCall{Stage: 2, Input: engine.NewSliceSource(
		engine.Chunk{Text: &engine.Text{Text: "a"}}, engine.Chunk{Text: &engine.Text{Text: "b"}},
	)})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(texts(outs)); got != "[2:a|post.0 2:b|post.0]" {
		t.Errorf("outputs = %s", got)
	}
	if f.rec.callsOf("talker") != 0 || f.rec.callsOf("vocoder") != 0 {
		t.Error("other stages ran")
	}
	if next, ok := s.Selection().Next(2); ok {
		t.Errorf("a single-stage selection has a next stage %d", next)
	}
	_, err = f.o.SubmitStage(context.Background(), StageCall{Stage: 7})
	codeIs(t, err, CodeBadRequest)
	contains(t, err, "stage 7 is not on the route (0 -> 2 -> 1 -> 3)")
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t, setup{})
	s, err := f.o.Submit(context.Background(), Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	if n, err := testutil.GatherAndCount(f.reg, "omnistage_requests_total", "omnistage_stage_queue_depth"); err != nil || n < 2 {
		t.Errorf("gathered %d series, %v", n, err)
	}
}

func TestServeSomeStages(t *testing.T) {
	cfg := newFixture(t, setup{}).o.cfg
	reg := engine.Registry{}
	var warmed atomic.Int32
	testengine.Register(&reg, &testengine.Hooks{Warm: func(*testengine.Engine) error { warmed.Add(1); return nil }},
		"test-talker", "test-vocoder", "test-post", "test-aligner")
	o, err := New(cfg, Options{Registry: &reg, Stages: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown(context.Background())
	if warmed.Load() != 1 || len(o.Stats().Stages) != 1 {
		t.Fatalf("warmed %d replicas, stats %+v; want stage 1 only", warmed.Load(), o.Stats())
	}
	s, err := o.SubmitStage(context.Background(), StageCall{Stage: 1, Input: engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: "x"}})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	_, err = o.Submit(context.Background(), Request{})
	codeIs(t, err, CodeUnavailable)
	contains(t, err, "stage 0 (talker) is not served here")
	if _, err := New(cfg, Options{Registry: &reg, Stages: []int{9}}); err == nil {
		t.Error("stage 9 accepted")
	}
}

// TestHopsShareAnID runs two hops with the same id at once (a coordinator
// that retried a hop) beside an ordinary request of that id: none is a
// conflict, a second ordinary request is, and one Abort of the id reaches
// them all and leaves nothing held.
func TestHopsShareAnID(t *testing.T) {
	started := make(chan string, 8)
	f := newFixture(t, setup{deploy: "  stages:\n    - {id: 1, max_inflight: 3}", hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		started <- e.Spec.Name
		<-ctx.Done()
		return ctx.Err()
	}}})
	ctx := context.Background()
	hop := func() *Stream {
		t.Helper()
		s, err := f.o.SubmitStage(ctx, StageCall{ID: "r1", Stage: 1, Input: engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: "x"}})})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := hop(), hop()
	plain, err := f.o.Submit(ctx, Request{ID: "r1"})
	if err != nil {
		t.Fatalf("an ordinary request beside hops of its id: %v", err)
	}
	for range 5 { // each hop's stage and the ordinary request's three
		<-started
	}
	_, err = f.o.Submit(ctx, Request{ID: "r1"})
	codeIs(t, err, CodeConflict)
	if st, ok := f.o.Lookup("r1"); !ok || st != StateActive {
		t.Errorf("lookup = %s, %v", st, ok)
	}
	if a.ID() != "r1" || b.ID() != "r1" {
		t.Errorf("hop ids %q, %q; want the request's id", a.ID(), b.ID())
	}
	if err := f.o.Abort(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Stream{a, b, plain} {
		codeIs(t, s.Err(), CodeAborted)
	}
	if _, ok := f.o.Lookup("r1"); ok {
		t.Error("the id is still held after the abort")
	}
	f.assertIdle()
}

// TestTimings checks each stage's timeline: none before the request ends,
// then one per route stage, in route order, each bound before it started,
// its first output before it ended.
func TestTimings(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, setup{hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if e.Spec.Name == "aligner" {
			<-hold // the request cannot end before the first check
		}
		return nil
	}}})
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "x y"}, Modalities: []string{"audio", "timestamps"}})
	if err != nil {
		t.Fatal(err)
	}
	if tl := s.Timings(); tl != nil {
		t.Errorf("timings before the end: %+v", tl)
	}
	close(hold)
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	tl := s.Timings()
	if len(tl) != len(s.Selection().Stages) {
		t.Fatalf("%d timings for stages %v", len(tl), s.Selection().Stages)
	}
	for i, st := range tl {
		if st.Stage != s.Selection().Stages[i] || st.Replica == "" || st.Name == "" {
			t.Errorf("timing %d: %+v", i, st)
		}
		if !(0 <= st.BoundMs && st.BoundMs <= st.StartMs && st.StartMs <= st.FirstOutputMs && st.FirstOutputMs <= st.EndMs) {
			t.Errorf("stage %d's timeline is out of order: %+v", st.Stage, st)
		}
	}
}

// TestLostReplicaRace: a replica lost while its engine reports the loss
// fails the request with replica_lost, whichever of the two the pool hears
// first (the watcher's mark, then the engine's error before the watcher
// has told the request, made it a stage_failed 500).
func TestLostReplicaRace(t *testing.T) {
	f := newFixture(t, setup{opts: noRestartSoon, hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if e.Spec.Name == "post" {
			e.Lose()
			return fmt.Errorf("worker exited: %w", engine.ErrReplicaLost)
		}
		return nil
	}}, deploy: "  stages:\n    - {id: 2, replicas: 64}"})
	for i := range 64 {
		s, err := f.o.Submit(context.Background(), Request{ID: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		codeIs(t, s.Err(), CodeReplicaLost)
	}
}
