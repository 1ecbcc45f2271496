package process_test

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
	"github.com/omnistage/omnistage/internal/testkit"
)

// killTexts are long enough that a talker's job lasts as long as its
// request: more sentences than the vocoder holds (its stream buffer and
// what it may take ahead), so the talker waits for the vocoder.
func killTexts() []string {
	words := []string{"red", "green", "blue", "amber", "silver", "violet"}
	var texts []string
	for k := range 3 {
		var b strings.Builder
		for i := range 14 {
			fmt.Fprintf(&b, "The %s lamp number %d is on. ", words[(i+k)%len(words)], i+1)
		}
		texts = append(texts, b.String())
	}
	return texts
}

// speak runs text through o and returns its audio chunks as they came.
// A request with every > 0 streams its text, a sentence each every, as a
// live session does: its talker's job lasts as long.
func speak(o *orchestrator.Orchestrator, text string, every time.Duration) ([]engine.Chunk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := orchestrator.Request{Prompt: engine.Prompt{Text: text}}
	if every > 0 {
		req = orchestrator.Request{Input: &pacedSource{pieces: strings.SplitAfter(text, ". "), every: every}}
	}
	s, err := o.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return nil, err
	}
	return outs[0].Chunks, nil
}

// pacedSource yields pieces of text, the second and later each after a
// pause of every.
type pacedSource struct {
	pieces []string
	every  time.Duration
	next   int
}

func (s *pacedSource) Recv(ctx context.Context) (engine.Chunk, error) {
	if s.next == len(s.pieces) {
		return engine.Chunk{}, io.EOF
	}
	if s.next > 0 {
		t := time.NewTimer(s.every)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return engine.Chunk{}, ctx.Err()
		}
	}
	s.next++
	return engine.Chunk{Text: &engine.Text{Text: s.pieces[s.next-1]}}, nil
}

// migrations reads omnistage_migrations_total{stage, outcome="migrated"}.
func migrations(t *testing.T, reg *prometheus.Registry, stage int) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "omnistage_migrations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["stage"] == fmt.Sprint(stage) && labels["outcome"] == "migrated" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// alive returns the workers of stage that have neither exited nor been
// lost, oldest first.
func (f *fixture) alive(stage int) []*process.Engine {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []*process.Engine
	for i, w := range f.workers {
		if f.stages[i] != stage {
			continue
		}
		select {
		case <-w.Exited():
		case <-w.Lost():
		default:
			live = append(live, w)
		}
	}
	return live
}

// TestKillUnderLoad runs the built-in tts pipeline with its talker and its
// vocoder in two worker processes each, and kills workers with SIGKILL,
// the talker's and the vocoder's in turn, while requests stream through
// them (one client's whole texts, three clients' texts streamed a
// sentence at a time, whose talker's job lasts as long): no request fails, and each
// one's audio is, chunk for chunk and sample for sample, that of the
// whole text run in process with nothing killed.
func TestKillUnderLoad(t *testing.T) {
	yaml, err := pipeline.BuiltinYAML("tts")
	if err != nil {
		t.Fatal(err)
	}
	procYAML := string(yaml)
	for _, r := range [][2]string{
		// A long request may outlive several kills (ten or more under
		// -race): the limit on its moves is the orchestrator's tests'.
		{"deploy:\n  stages:", "deploy:\n  max_migrations: 100\n  stages:"},
		{"- {id: 0, replicas: 1, max_inflight: 64, options: {voice: slt}}", "- {id: 0, replicas: 2, max_inflight: 64, placement: process, options: {voice: slt}}"},
		{"- {id: 1, replicas: 1, max_inflight: 64}", "- {id: 1, replicas: 2, max_inflight: 64, placement: process}"},
	} {
		if !strings.Contains(procYAML, r[0]) {
			t.Fatalf("the built-in tts pipeline no longer deploys a stage as %q", r[0])
		}
		procYAML = strings.Replace(procYAML, r[0], r[1], 1)
	}
	texts := killTexts()
	inproc := start(t, writeConfig(t, string(yaml)), registerSpeech)
	// The streamed texts' talkers take a good part of their request's
	// time, so that a talker's worker killed at any moment is likely to
	// be running one.
	every := 50 * time.Millisecond
	if raceEnabled {
		every *= 8
	}
	want := make([][]engine.Chunk, len(texts))
	for i, text := range texts {
		if want[i], err = speak(inproc.o, text, 0); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	f := start(t, writeConfig(t, procYAML), registerSpeech, func(o *orchestrator.Options) {
		o.Registerer = reg
		o.RestartBackoff, o.RestartBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	})
	const clients = 4
	var stop atomic.Bool
	var requests, failed, differ atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; !stop.Load(); i++ {
				k := i % len(texts)
				got, err := speak(f.o, texts[k], time.Duration(min(c, 1))*every)
				requests.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					t.Errorf("text %d: %v", k, err)
				case !reflect.DeepEqual(got, want[k]):
					differ.Add(1)
					t.Errorf("text %d: %d audio chunks, not those of the run in process (%d)", k, len(got), len(want[k]))
				}
			}
		})
	}

	// Kill a worker of each stage in turn, each time a request has ended
	// since the last kill, until each stage has moved requests twice (a
	// worker killed between jobs moves none) and at least six times in all.
	kills := 0
	for ; kills < 6 || migrations(t, reg, 0) < 2 || migrations(t, reg, 1) < 2; kills++ {
		if kills == 16 {
			t.Errorf("after %d kills, %v talker and %v vocoder requests moved", kills, migrations(t, reg, 0), migrations(t, reg, 1))
			break
		}
		stage, done := kills%2, requests.Load()
		testkit.Eventually(t, fmt.Sprintf("stage %d to have both replicas", stage), func() bool {
			return f.o.Stats().Stages[stage].Healthy == 2 && len(f.alive(stage)) == 2
		})
		testkit.Eventually(t, "a request to end", func() bool { return requests.Load() > done })
		// Let the requests that start now get into their stream.
		time.Sleep(100 * time.Millisecond)
		live := f.alive(stage)
		victim := live[(kills/2)%len(live)]
		if err := syscall.Kill(victim.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the loss to be noticed", func() bool { return f.o.Stats().Stages[stage].Healthy < 2 })
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d requests, %d kills, %v talker and %v vocoder requests moved, %d failed, %d with other audio",
		requests.Load(), kills, migrations(t, reg, 0), migrations(t, reg, 1), failed.Load(), differ.Load())
	if st := f.o.Stats(); st.InFlight != 0 || st.Bindings() != 0 {
		t.Errorf("after the load: %+v", st)
	}
}
