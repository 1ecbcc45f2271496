package orchestrator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
	"github.com/omnistage/omnistage/internal/turns"
)

// TestDeadline: a request is due at its arrival until its final stage
// delivers audio, then leadTime before that audio runs out.
func TestDeadline(t *testing.T) {
	rq := &request{submitted: time.Now()}
	if got := rq.deadline(); !got.Equal(rq.submitted) {
		t.Errorf("deadline before any audio %v, want the arrival %v", got, rq.submitted)
	}
	rq.delivered(&engine.Audio{SampleRate: 16000}) // no samples: nothing played
	if rq.firstAudio.Load() != 0 {
		t.Error("an empty block counted as audio")
	}
	rq.delivered(&engine.Audio{SampleRate: 16000, Samples: make([]int16, 16000)})
	rq.delivered(&engine.Audio{SampleRate: 16000, Samples: make([]int16, 8000)})
	first := rq.submitted.Add(time.Duration(rq.firstAudio.Load() - 1))
	if got, want := rq.deadline(), first.Add(1500*time.Millisecond-leadTime); !got.Equal(want) {
		t.Errorf("deadline after 1.5 s of audio %v, want %v (leadTime before it runs out)", got, want)
	}
}

// TestTurnsReachEngines: with a scheduler, every stage's Process can take
// turns, and a turn held elsewhere holds them back.
func TestTurnsReachEngines(t *testing.T) {
	sched := turns.New(1)
	took := make(chan string, 8)
	f := newFixture(t, setup{
		opts: func(o *Options) { o.Turns = sched },
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			turn, err := engine.Turn(ctx)
			if err != nil {
				return err
			}
			took <- e.Spec.Name
			turn.End()
			return nil
		}},
	})
	hold, err := sched.Acquire(context.Background(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.o.Submit(context.Background(), Request{ID: "turns"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sched.Waiting() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(took) != 0 {
		t.Fatalf("%s took a turn while it was held", <-took)
	}
	hold.End()
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	if len(took) != 3 { // talker, vocoder and post (audio only: no aligner)
		t.Errorf("%d stages took turns, want 3", len(took))
	}
}

// TestNeededAtGivesWay: a unit whose result is needed only once the
// listener reaches 10 s of its request's audio (engine.NeededAt) waits
// behind a unit of a request that arrived later, due by its deadline; its
// due time is when the listener gets there.
func TestNeededAtGivesWay(t *testing.T) {
	sched := turns.New(1)
	o := &Orchestrator{opts: Options{Turns: sched}}
	early := &request{o: o, submitted: time.Now().Add(-time.Second)}
	early.delivered(&engine.Audio{SampleRate: 16000, Samples: make([]int16, 160)})
	late := &request{o: o, submitted: time.Now()}
	first := early.submitted.Add(time.Duration(early.firstAudio.Load() - 1))
	if got := early.playsAt(10 * time.Second); !got.Equal(first.Add(10 * time.Second)) {
		t.Errorf("playsAt(10s) = %v, want 10 s after the first audio, %v", got, first.Add(10*time.Second))
	}

	hold, err := sched.Acquire(context.Background(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	take := func(name string, ctx context.Context, rq *request) {
		turn, err := requestTurns{rq}.Turn(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		order <- name
		turn.End()
	}
	go take("needed later", engine.NeededAt(context.Background(), 10*time.Second), early)
	testkit.Eventually(t, "the first waiter", func() bool { return sched.Waiting() == 1 })
	go take("due now", context.Background(), late)
	testkit.Eventually(t, "both waiters", func() bool { return sched.Waiting() == 2 })
	hold.End()
	if a, b := <-order, <-order; a != "due now" || b != "needed later" {
		t.Errorf("turns went to %q, then %q", a, b)
	}
}

// TestDeadlineWithTimestamps: a request that asks for word timestamps as
// well as audio is due by the audio its listener has, though its final
// stage (the aligner) makes none: once its first audio is out, its later
// units give way to other requests' first ones.
func TestDeadlineWithTimestamps(t *testing.T) {
	cfg, err := pipeline.Parse([]byte(`
pipeline:
  name: t
  input: text
  stages:
    - {id: 0, name: talker, engine: test-tone, input: text, output: audio, final_output: true}
  aligner: {engine: test-aligner}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := &engine.Registry{}
	testengine.RegisterTone(reg, "test-tone")
	release := make(chan struct{})
	testengine.Register(reg, &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}, "test-aligner")
	o, err := New(cfg, Options{Registry: reg, Turns: turns.New(2)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = o.Shutdown(ctx)
	})
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free)
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second of tone: its listener has it in hand for longer than leadTime.
	text := strings.Repeat("x", 1000+int(leadTime/time.Millisecond))
	s, err := o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: text}, Modalities: []string{"audio", "timestamps"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the request's first audio to count", func() bool { return s.rq.firstAudio.Load() != 0 })
	if d := s.rq.deadline(); !d.After(s.rq.submitted) {
		t.Errorf("deadline %v, still the arrival, once audio was delivered", d)
	}
	free()
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
}
