package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// fastRestart makes lost replicas come back within milliseconds.
func fastRestart(o *Options) {
	o.RestartBackoff = 5 * time.Millisecond
	o.RestartBackoffMax = 50 * time.Millisecond
}

// closeCounter counts the Close calls of each test engine.
type closeCounter struct {
	mu sync.Mutex
	n  map[*testengine.Engine]int
}

func (c *closeCounter) add(e *testengine.Engine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[*testengine.Engine]int{}
	}
	c.n[e]++
}

func (c *closeCounter) of(e *testengine.Engine) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[e]
}

func (f *fixture) engineOf(id string) *testengine.Engine {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.rec.engines[id]
}

func (f *fixture) restarts(stage string) float64 {
	return testutil.ToFloat64(f.o.metrics.restarts.WithLabelValues(stage))
}

// TestRestartLostReplica loses a replica while a request is bound to it:
// the request fails as before, a new replica takes the lost one's slot, and
// new requests run on it. The lost engine is closed once.
func TestRestartLostReplica(t *testing.T) {
	var closes closeCounter
	release := make(chan struct{})
	var servedMu sync.Mutex
	servedBy := map[string]*testengine.Engine{}
	f := newFixture(t, setup{
		opts:   fastRestart,
		deploy: "  stages:\n    - {id: 1, replicas: 2, max_inflight: 1}",
		hooks: testengine.Hooks{
			Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
				if e.Spec.Name != "vocoder" {
					return nil
				}
				servedMu.Lock()
				servedBy[job.RequestID] = e
				servedMu.Unlock()
				if strings.HasPrefix(job.RequestID, "hold") {
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				return nil
			},
			Close: closes.add,
		},
	})
	a, err := f.o.Submit(context.Background(), Request{ID: "hold-a"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "vocoder running", func() bool { return f.rec.callsOf("vocoder") == 1 })
	f.rec.mu.Lock()
	lostID := f.rec.replicas["hold-a"][1]
	f.rec.mu.Unlock()
	victim := f.engineOf(lostID)
	victim.Lose()

	// The bound request fails; it is not moved.
	err = a.Err()
	codeIs(t, err, CodeReplicaLost)
	var rl *ReplicaLostError
	if !errors.As(err, &rl) || rl.Stage != 1 || rl.Replica != lostID {
		t.Fatalf("error = %#v", err)
	}
	testkit.Eventually(t, "the lost replica to be back", func() bool { return f.o.Stats().Stages[1].Healthy == 2 })
	fresh := f.engineOf(lostID)
	if fresh == victim {
		t.Fatal("the slot still holds the lost engine")
	}
	f.rec.mu.Lock()
	warmed := f.rec.warmed[lostID]
	f.rec.mu.Unlock()
	if warmed != 2 {
		t.Errorf("replica %s warmed %d times, want 2 (start and restart)", lostID, warmed)
	}
	testkit.Eventually(t, "the lost engine to be closed", func() bool { return closes.of(victim) == 1 })
	if got := f.restarts("1"); got != 1 {
		t.Errorf("restarts of stage 1 = %v, want 1", got)
	}

	// Two requests held at once take both replicas, the new one included.
	var streams []*Stream
	for _, id := range []string{"hold-b", "hold-c"} {
		s, err := f.o.Submit(context.Background(), Request{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	testkit.Eventually(t, "both held", func() bool { return f.rec.callsOf("vocoder") == 3 })
	servedMu.Lock()
	onFresh := servedBy["hold-b"] == fresh || servedBy["hold-c"] == fresh
	servedMu.Unlock()
	if !onFresh {
		t.Error("no request ran on the new replica")
	}
	close(release)
	for _, s := range streams {
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if closes.of(victim) != 1 || closes.of(fresh) != 0 {
		t.Errorf("closes: lost engine %d, new one %d; want 1 and 0", closes.of(victim), closes.of(fresh))
	}
	f.assertIdle()
}

// TestRestartAfterEngineError restarts the only replica of a stage that an
// engine error reported lost.
func TestRestartAfterEngineError(t *testing.T) {
	f := newFixture(t, setup{opts: fastRestart, hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if e.Spec.Name == "post" && job.RequestID == "doomed" {
			return fmt.Errorf("worker exited: %w", engine.ErrReplicaLost)
		}
		return nil
	}}})
	s, err := f.o.Submit(context.Background(), Request{ID: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Err()
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, "stage 2 (post): replica post/0 was lost")
	testkit.Eventually(t, "post to be back", func() bool { return f.o.Stats().Stages[2].Healthy == 1 })
	s, err = f.o.Submit(context.Background(), Request{ID: "after", Prompt: engine.Prompt{Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if outs, err := collect(t, s); err != nil || len(outs) != 1 {
		t.Fatalf("request after the restart: %v, %v", texts(outs), err)
	}
	if got := f.restarts("2"); got != 1 {
		t.Errorf("restarts of stage 2 = %v, want 1", got)
	}
	f.assertIdle()
}

// TestRestartBackoff loses the only replica of a stage whose next engines
// fail to build twice and to warm once: the attempts come with a doubling
// backoff, the stage refuses work meanwhile, and the fourth attempt brings
// it back.
func TestRestartBackoff(t *testing.T) {
	const initial = 10 * time.Millisecond
	var (
		mu        sync.Mutex
		attempts  []time.Time // builds of post's replica, the first at start-up
		warms     atomic.Int32
		badWarm   atomic.Pointer[testengine.Engine]
		closes    closeCounter
		proceed   = make(chan struct{})
		logs      testkit.SyncBuffer
		unblocked bool
	)
	defer func() {
		if !unblocked {
			close(proceed)
		}
	}()
	f := newFixture(t, setup{
		opts: func(o *Options) {
			o.RestartBackoff, o.RestartBackoffMax = initial, time.Second
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		},
		newErr: func(spec engine.Spec) error {
			if spec.Name != "post" {
				return nil
			}
			mu.Lock()
			attempts = append(attempts, time.Now())
			n := len(attempts)
			mu.Unlock()
			switch n {
			case 2, 3:
				return errors.New("out of memory")
			case 5:
				<-proceed
			}
			return nil
		},
		hooks: testengine.Hooks{
			Warm: func(e *testengine.Engine) error {
				if e.Spec.Name == "post" && warms.Add(1) == 2 {
					badWarm.Store(e)
					return errors.New("model file truncated")
				}
				return nil
			},
			Close: closes.add,
		},
	})
	victim := f.engineOf("post/0")
	victim.Lose()
	testkit.Eventually(t, "the fourth attempt", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) == 5
	})
	if st := f.o.Stats().Stages[2]; st.Healthy != 0 {
		t.Fatalf("stage 2 while restarting: %+v", st)
	}
	_, err := f.o.Submit(context.Background(), Request{ID: "meanwhile"})
	codeIs(t, err, CodeUnavailable)
	contains(t, err, "stage 2 (post) has no healthy replica")
	if e := badWarm.Load(); e == nil || closes.of(e) != 1 {
		t.Errorf("the engine that failed to warm was not closed once")
	}

	unblocked = true
	close(proceed)
	testkit.Eventually(t, "post to be back", func() bool { return f.o.Stats().Stages[2].Healthy == 1 })
	s, err := f.o.Submit(context.Background(), Request{ID: "after"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the lost engine to be closed", func() bool { return closes.of(victim) == 1 })

	// Each failed attempt doubled the wait before the next; a timer never
	// fires early, and the jitter takes at most a fifth.
	mu.Lock()
	for i := 2; i < len(attempts); i++ {
		want := initial << (i - 1) * 4 / 5
		if gap := attempts[i].Sub(attempts[i-1]); gap < want {
			t.Errorf("attempt %d came %s after the one before, want at least %s", i, gap, want)
		}
	}
	mu.Unlock()
	if got := f.restarts("2"); got != 1 {
		t.Errorf("restarts = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.o.metrics.restartFailures.WithLabelValues("2")); got != 3 {
		t.Errorf("restart failures = %v, want 3", got)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="replica restart failed" replica=post/0`); n != 3 {
		t.Errorf("%d restart failures logged, want 3:\n%s", n, out)
	}
	if !strings.Contains(out, `msg="replica restarted" replica=post/0 attempt=4 cause="replica lost"`) {
		t.Errorf("no restart line with its attempt and cause:\n%s", out)
	}
	f.assertIdle()
}

// TestCrashLoopBackoff loses the same slot's replica again and again right
// after each restart: each restart waits twice as long as the one before.
func TestCrashLoopBackoff(t *testing.T) {
	var logs testkit.SyncBuffer
	f := newFixture(t, setup{opts: func(o *Options) {
		o.RestartBackoff, o.RestartBackoffMax = 2*time.Millisecond, 10*time.Second
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}})
	for i, want := range []string{"2ms", "4ms", "8ms", "16ms"} {
		f.engineOf("post/0").Lose()
		// The backoff logged is the one before jitter.
		line := fmt.Sprintf(`msg="replica restarted" replica=post/0 attempt=1 cause="replica lost" backoff=%s `, want)
		testkit.Eventually(t, "restart "+strconv.Itoa(i+1)+" logged with backoff "+want, func() bool {
			return strings.Count(logs.String(), `msg="replica restarted"`) == i+1
		})
		if !strings.Contains(logs.String(), line) {
			t.Errorf("restart %d: no line %q in\n%s", i+1, line, logs.String())
		}
	}
	s, err := f.o.Submit(context.Background(), Request{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownDuringRestartBackoff shuts down while a lost replica waits
// for its restart: the wait ends at once and nothing is left running.
func TestShutdownDuringRestartBackoff(t *testing.T) {
	var closes closeCounter
	f := newFixture(t, setup{opts: noRestartSoon, hooks: testengine.Hooks{Close: closes.add}})
	victim := f.engineOf("vocoder/0")
	victim.Lose()
	testkit.Eventually(t, "the loss", func() bool { return f.o.Stats().Stages[1].Healthy == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := f.o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	if f.restarts("1") != 0 || closes.of(victim) != 1 {
		t.Errorf("restarts %v, lost engine closed %d times; want 0 and 1", f.restarts("1"), closes.of(victim))
	}
	goleak.VerifyNone(t)
}

// TestRequestWaitsForRestart: a request that arrives while the only
// replica of a stage is being restarted waits for the new one and is
// served, rather than refused as unavailable.
func TestRequestWaitsForRestart(t *testing.T) {
	f := newFixture(t, setup{opts: func(o *Options) {
		o.RestartBackoff = 100 * time.Millisecond // well past the request's arrival
		o.RestartBackoffMax = 100 * time.Millisecond
	}})
	lost := f.engineOf("vocoder/0")
	lost.Lose()
	testkit.Eventually(t, "the replica out of service", func() bool { return f.o.Stats().Stages[1].Healthy == 0 })
	s, err := f.o.Submit(context.Background(), Request{ID: "after"})
	if err != nil {
		t.Fatalf("a request while the stage restarts: %v", err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	if f.engineOf("vocoder/0") == lost {
		t.Error("the request ran on the lost replica")
	}
}
