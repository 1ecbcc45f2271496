package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// The migration tests run the talker (stage 0) and the vocoder (stage 1)
// alone, on a text that arrives in pieces: the talker makes a unit of
// work (a Span) of each piece, and the vocoder one of each talker unit.
const migratePieces = 3

func migrateInput() engine.Source {
	var cs []engine.Chunk
	for i := range migratePieces {
		cs = append(cs, engine.Chunk{Text: &engine.Text{Text: fmt.Sprintf("p%d ", i)}})
	}
	return engine.NewSliceSource(cs...)
}

// migrateDeploy deploys the talker and the vocoder with their options
// and further keys (", replicas: 2").
func migrateDeploy(talker, vocoder string) string {
	return fmt.Sprintf("  stages:\n    - {id: 0, %s}\n    - {id: 1, %s}", talker, vocoder)
}

// loser loses, times times, the replica of stage (or of each stage of
// "talker+vocoder", times times each) that runs a job of a request whose
// id starts with "lose", before the job's output chunk at: the replica is
// lost (its Watcher) and the job waits for its cancellation, as a worker
// killed mid-stream does.
type loser struct {
	stage string
	at    int
	times atomic.Int32
	each  sync.Map // stage -> *atomic.Int32, the losses left, when stage names two
	lost  sync.Map // replica id -> true
}

func (l *loser) chunk(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
	if !strings.Contains("+"+l.stage+"+", "+"+e.Spec.Name+"+") || n != l.at || !strings.HasPrefix(job.RequestID, "lose") {
		return nil
	}
	left := &l.times
	if strings.Contains(l.stage, "+") {
		fresh := &atomic.Int32{}
		fresh.Store(l.times.Load())
		v, _ := l.each.LoadOrStore(e.Spec.Name, fresh)
		left = v.(*atomic.Int32)
	}
	if left.Add(-1) < 0 {
		return nil
	}
	l.lost.Store(e.ReplicaID(), true)
	e.Lose()
	<-ctx.Done()
	return ctx.Err()
}

func (l *loser) wasLost(id string) bool {
	_, ok := l.lost.Load(id)
	return ok
}

// render writes each output chunk as text: the unit a chunk begins in
// brackets, then its text, or "end" for an end-of-sentence mark.
func render(outs []OutputChunk) []string {
	var s []string
	for _, o := range outs {
		c := o.Chunk
		r := ""
		if c.Span != nil {
			r = fmt.Sprintf("[%d]", c.Span.Sentence)
		}
		switch {
		case c.Text != nil:
			r += c.Text.Text
		case c.Audio != nil && c.Audio.EndOfSentence:
			r += "end"
		}
		s = append(s, r)
	}
	return s
}

func (f *fixture) migrations(stage, outcome string) float64 {
	return testutil.ToFloat64(f.o.metrics.migrations.WithLabelValues(stage, outcome))
}

// runMigrate runs the pieces as request id and returns its output.
func runMigrate(t *testing.T, f *fixture, id string) ([]string, error) {
	t.Helper()
	s, err := f.o.Submit(context.Background(), Request{ID: id, Input: migrateInput()})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := collect(t, s)
	return render(outs), err
}

// TestMigrateDeterministic loses a replica of a stage whose engine replays
// deterministically, at points across its stream: the request goes on on
// the other replica, and its output is that of a run that lost nothing,
// with no gap and no repeat.
func TestMigrateDeterministic(t *testing.T) {
	const det = "replicas: 2, options: {spans: true, replay: deterministic"
	for _, tc := range []struct {
		name            string
		talker, vocoder string
		stage           string
		at              int
	}{
		{"vocoder, first unit, nothing delivered", det + "}", det + ", chunks: 3}", "vocoder", 0},
		{"vocoder, first unit, under way", det + "}", det + ", chunks: 3}", "vocoder", 1},
		{"vocoder, at a unit boundary", det + "}", det + ", chunks: 3}", "vocoder", 3},
		{"vocoder, second unit, under way", det + "}", det + ", chunks: 3}", "vocoder", 4},
		{"vocoder, last unit", det + "}", det + ", chunks: 3}", "vocoder", 7},
		{"vocoder, input units of two chunks", det + ", chunks: 2}", det + ", chunks: 3}", "vocoder", 4},
		{"talker, second unit", det + "}", det + ", chunks: 3}", "talker", 1},
		{"talker, last unit", det + "}", det + ", chunks: 3}", "talker", 2},
		{"both stages, each its own replica", det + "}", det + ", chunks: 3}", "talker+vocoder", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &loser{stage: tc.stage, at: tc.at}
			f := newFixture(t, setup{
				opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
				deploy: migrateDeploy(tc.talker, tc.vocoder),
				hooks:  testengine.Hooks{Chunk: l.chunk},
			})
			want, err := runMigrate(t, f, "whole")
			if err != nil {
				t.Fatal(err)
			}
			l.times.Store(1)
			got, err := runMigrate(t, f, "lose")
			if err != nil {
				t.Fatalf("the request failed: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("output\n%q\nwant that of a run that lost nothing\n%q", got, want)
			}
			for id, name := range []string{"talker", "vocoder"} {
				stage := fmt.Sprint(id)
				want := 0.0
				if strings.Contains(tc.stage, name) {
					want = 1
				}
				if n := f.migrations(stage, migrated); n != want {
					t.Errorf("omnistage_migrations_total{stage=%s,outcome=migrated} = %v, want %v", stage, n, want)
				}
				f.rec.mu.Lock()
				last := f.rec.replicas["lose"][id]
				f.rec.mu.Unlock()
				if l.wasLost(last) {
					t.Errorf("stage %s's last run was on %s, the replica lost", name, last)
				}
			}
			f.assertIdle()
		})
	}
}

// TestMigrateVarying loses a replica of a stage whose engine replays but
// not deterministically (each replica marks its output): the units
// delivered whole are not sent again, and the unit cut short starts again
// from its beginning on the other replica.
func TestMigrateVarying(t *testing.T) {
	// Per vocoder unit: three chunks, then an end-of-sentence mark; the
	// loss comes before the at-th of its chunks of text.
	unit := func(u int, replica string) []string {
		var s []string
		for k := range 3 {
			text := fmt.Sprintf("p%d |talker.0|vocoder@%s.%d", u, replica, k)
			if k == 0 {
				text = fmt.Sprintf("[%d]%s", u, text)
			}
			s = append(s, text)
		}
		return append(s, "end")
	}
	for _, tc := range []struct {
		name string
		at   int
		// want lists the output, a for the lost replica, b for the other.
		want func(a, b string) []string
	}{
		{"at a unit boundary", 3, func(a, b string) []string {
			return slicesConcat(unit(0, a), unit(1, b), unit(2, b))
		}},
		{"within a unit", 4, func(a, b string) []string {
			return slicesConcat(unit(0, a), unit(1, a)[:1], unit(1, b), unit(2, b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &loser{stage: "vocoder", at: tc.at}
			l.times.Store(1)
			f := newFixture(t, setup{
				opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
				deploy: migrateDeploy("options: {spans: true}", "replicas: 2, options: {spans: true, ends: true, chunks: 3, replay: varying}"),
				hooks:  testengine.Hooks{Chunk: l.chunk},
			})
			got, err := runMigrate(t, f, "lose")
			if err != nil {
				t.Fatalf("the request failed: %v", err)
			}
			a, b := "vocoder/0", "vocoder/1"
			if l.wasLost(b) {
				a, b = b, a
			}
			if want := tc.want(a, b); !reflect.DeepEqual(got, want) {
				t.Errorf("output\n%q\nwant\n%q", got, want)
			}
			f.assertIdle()
		})
	}
}

func slicesConcat(parts ...[]string) []string {
	var s []string
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

// TestMigrateRefused: where a request cannot go on elsewhere, the loss
// fails it with 502 replica_lost as before, naming the lost replica.
func TestMigrateRefused(t *testing.T) {
	const talker = "options: {spans: true}"
	for _, tc := range []struct {
		name, vocoder, deploy string
		// outcome is the migrations' outcome counted, "" for none.
		outcome, message string
	}{
		{"turned off", "replicas: 2, migrate: false, options: {spans: true, replay: deterministic}", "", "", ""},
		{"an engine that cannot replay", "replicas: 2, options: {spans: true}", "", "", ""},
		{"no other replica", "replicas: 1, options: {spans: true, replay: deterministic}", "", migrateNoReplica, "no other replica of the stage"},
		{"the limit", "replicas: 3, options: {spans: true, replay: deterministic}", "  max_migrations: 1\n", migrateLimit, "moved 1 times already (max_migrations)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &loser{stage: "vocoder", at: 1}
			l.times.Store(2)
			f := newFixture(t, setup{
				opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
				deploy: tc.deploy + migrateDeploy(talker, tc.vocoder),
				hooks:  testengine.Hooks{Chunk: l.chunk},
			})
			_, err := runMigrate(t, f, "lose")
			codeIs(t, err, CodeReplicaLost)
			contains(t, err, "stage 1 (vocoder): replica vocoder/")
			if tc.message != "" {
				contains(t, err, tc.message)
			}
			for _, o := range []string{migrated, migrateNoReplica, migrateLimit} {
				want := 0.0
				if o == tc.outcome || o == migrated && tc.outcome == migrateLimit {
					want = 1
				}
				if got := f.migrations("1", o); got != want {
					t.Errorf("omnistage_migrations_total{stage=1,outcome=%s} = %v, want %v", o, got, want)
				}
			}
			f.assertIdle()
		})
	}
}

// TestMigrateCancelled aborts a request while it waits for a busy replica
// to go on with: it ends aborted, leaving nothing bound or queued.
func TestMigrateCancelled(t *testing.T) {
	l := &loser{stage: "vocoder", at: 1}
	l.times.Store(1)
	release := make(chan struct{})
	f := newFixture(t, setup{
		opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
		deploy: migrateDeploy("options: {spans: true}", "replicas: 2, max_inflight: 1, options: {spans: true, replay: deterministic}"),
		hooks: testengine.Hooks{Chunk: l.chunk, Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "vocoder" && job.RequestID == "hold" {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}},
	})
	hold, err := f.o.Submit(context.Background(), Request{ID: "hold", Prompt: engine.Prompt{Text: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "hold on a vocoder", func() bool { return f.rec.callsOf("vocoder") == 1 })
	s, err := f.o.Submit(context.Background(), Request{ID: "lose", Input: migrateInput()})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the moving request to wait for the busy vocoder", func() bool { return f.o.Stats().Stages[1].Queued == 1 })
	if err := f.o.Abort(context.Background(), "lose"); err != nil {
		t.Fatal(err)
	}
	codeIs(t, s.Err(), CodeAborted)
	if st := f.o.Stats().Stages[1]; st.Queued != 0 {
		t.Errorf("%d still queued", st.Queued)
	}
	close(release)
	if _, err := collect(t, hold); err != nil {
		t.Fatal(err)
	}
	if got := f.migrations("1", migrated); got != 0 {
		t.Errorf("omnistage_migrations_total{stage=1,outcome=migrated} = %v, want 0", got)
	}
	f.assertIdle()
}

// TestMigrateDiverged: a replay said to be deterministic whose output
// differs from what was delivered fails the request, rather than splice
// two runs' output.
func TestMigrateDiverged(t *testing.T) {
	l := &loser{stage: "vocoder", at: 2}
	l.times.Store(1)
	var first sync.Once
	var firstID string
	f := newFixture(t, setup{
		opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
		deploy: migrateDeploy("options: {spans: true}", "replicas: 2, options: {spans: true, chunks: 3, replay: deterministic}"),
		hooks: testengine.Hooks{Chunk: l.chunk, Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "vocoder" {
				first.Do(func() { firstID = e.ReplicaID() })
				if e.ReplicaID() != firstID {
					// The other replica marks its output with a tag of its own.
					job.Params = json.RawMessage(`{"tag": "other"}`)
				}
			}
			return nil
		}},
	})
	_, err := runMigrate(t, f, "lose")
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, "made other output than it had delivered")
	if got := f.migrations("1", migrateDiverged); got != 1 {
		t.Errorf("omnistage_migrations_total{stage=1,outcome=diverged} = %v, want 1", got)
	}
	f.assertIdle()
}

// TestMigrateUnretained: a stage whose input has no units keeps it whole
// up to a bound; past it, a loss fails the request as before.
func TestMigrateUnretained(t *testing.T) {
	l := &loser{stage: "talker", at: 1}
	l.times.Store(1)
	f := newFixture(t, setup{
		opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
		deploy: migrateDeploy("replicas: 2, options: {spans: true, replay: deterministic}", "options: {}"),
		hooks:  testengine.Hooks{Chunk: l.chunk},
	})
	big := strings.Repeat("x", maxReplayBytes/2+1)
	in := engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: big}}, engine.Chunk{Text: &engine.Text{Text: big}})
	s, err := f.o.Submit(context.Background(), Request{ID: "lose", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, s)
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, "bytes kept for a replay")
	if got := f.migrations("0", migrateUnretained); got != 1 {
		t.Errorf("omnistage_migrations_total{stage=0,outcome=unretained} = %v, want 1", got)
	}
	f.assertIdle()
}

// TestLossAfterStageDone: the loss of a replica whose part of a request
// is done (a talker that spoke every sentence) leaves the request alone,
// where the stage could have moved.
func TestLossAfterStageDone(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, setup{
		opts: noRestartSoon, transitions: "  stage_transitions: [[0, 1]]",
		deploy: migrateDeploy("replicas: 2, options: {spans: true, replay: deterministic}", "options: {}"),
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.Spec.Name == "vocoder" {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}},
	})
	s, err := f.o.Submit(context.Background(), Request{ID: "x", Prompt: engine.Prompt{Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the vocoder to start", func() bool { return f.rec.callsOf("vocoder") == 1 })
	f.rec.mu.Lock()
	talker := f.rec.engines[f.rec.replicas["x"][0]]
	f.rec.mu.Unlock()
	// The talker's job ends once the vocoder has its one chunk.
	m := s.rq.bindings[0].mig
	if m == nil {
		t.Fatal("the talker's binding cannot move")
	}
	testkit.Eventually(t, "the talker's job to end", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.cancel == nil
	})
	talker.Lose()
	testkit.Eventually(t, "the talker's replica to be out of service", func() bool { return f.o.Stats().Stages[0].Healthy == 1 })
	close(release)
	if _, err := collect(t, s); err != nil {
		t.Fatalf("the request failed by the loss of a replica it no longer needed: %v", err)
	}
	f.assertIdle()
}
