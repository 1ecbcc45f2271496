package acceptance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
)

// committee is about 19 s of slt speech in six sentences: the paragraph
// the streamed hop was measured on.
const committee = "The committee met on Tuesday to review the budget. After a long discussion, they agreed to fund three new projects. " +
	"The first one will improve the city library. The second will repair the old bridge near the river. " +
	"The third will build a small park for children. Everyone left the meeting feeling hopeful about the future."

// TestPlacementsSpeakAlike runs the same text with the vocoder in a worker
// process, with the talker and the vocoder on two stage servers, and
// through omnistage run over three stage servers: the audio and the word
// timestamps are exactly the in-process pipeline's.
func TestPlacementsSpeakAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("starts seven servers with the real engines")
	}
	want := generate(t, serve(t).url, committee)

	t.Run("process", func(t *testing.T) {
		front := serve(t, "--config", writeFile(t, "process.yaml", ttsWith(t, "    - {id: 1, placement: process}\n")))
		sameSpeech(t, generate(t, front.url, committee), want)
	})

	var stages []*server
	for id := range 3 {
		stages = append(stages, serve(t, "--stage", fmt.Sprint(id)))
	}
	t.Run("remote", func(t *testing.T) {
		front := serve(t, "--config", writeFile(t, "remote.yaml", ttsWith(t, fmt.Sprintf(
			"    - {id: 0, placement: remote, endpoints: [%q]}\n    - {id: 1, placement: remote, endpoints: [%q]}\n", stages[0].url, stages[1].url))))
		sameSpeech(t, generate(t, front.url, committee), want)
	})
	t.Run("run", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run.wav")
		cmd := exec.Command(omnistage(t), "run", "--stage", stages[0].url, "--stage", stages[1].url, "--stage", stages[2].url, "--timestamps", "-o", out, committee)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("omnistage run: %v\n%s", err, stderr.String())
		}
		got := speech{audio: readWAV(t, out)}
		if err := json.Unmarshal(stdout, &got.words); err != nil {
			t.Fatalf("timestamps %q: %v", stdout, err)
		}
		sameSpeech(t, got, want)
		t.Logf("omnistage run:\n%s", stderr.String())
	})
}

func sameSpeech(t *testing.T, got, want speech) {
	t.Helper()
	if got.audio.SampleRate != want.audio.SampleRate || !slices.Equal(got.audio.Samples, want.audio.Samples) {
		t.Errorf("audio: %d samples at %d Hz, want the in-process %d at %d Hz", len(got.audio.Samples), got.audio.SampleRate, len(want.audio.Samples), want.audio.SampleRate)
	}
	if !reflect.DeepEqual(got.words, want.words) {
		t.Errorf("timestamps %v, want the in-process %v", got.words, want.words)
	}
}

// TestLostMidStream kills a worker process of a stage that does not
// migrate, and then the one stage server of a stage, with SIGKILL while a
// request streams through it: within a second that request fails with
// replica_lost naming the stage and the replica, a
// request of another stage's replica is untouched, and the slot recovers
// (a new worker; the stage server back on its port).
func TestLostMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("kills servers with the real engines")
	}
	long := strings.Repeat(committee+" ", 3)
	t.Run("worker", func(t *testing.T) {
		// migrate: false, or the request would go on on the other replica
		// (TestKillUnderLoad in placement/process tests that).
		front := serve(t, "--config", writeFile(t, "process.yaml", ttsWith(t, "    - {id: 1, placement: process, replicas: 2, migrate: false}\n")))
		other, stop := events(t, context.Background(), front.url, "other", long)
		defer stop()
		victim, stopVictim := events(t, context.Background(), front.url, "victim", long)
		defer stopVictim()
		first(t, other)
		first(t, victim)
		ws := front.workers(t)
		// The two requests are bound to the two replicas (least loaded
		// first); kill the one serving "victim": find it by elimination
		// when the loss shows, killing either is the same test.
		w := ws["vocoder/1"]
		if err := syscall.Kill(w.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		lostReq, lostEv, at, okReq := waitLoss(t, map[string]<-chan apijson.Event{"victim": victim, "other": other})
		took := at.Sub(killed)
		if took > time.Second {
			t.Errorf("the loss showed %s after the kill, want within 1s", took)
		}
		if msg := lostEv.Error.Message; !strings.Contains(msg, "stage 1 (vocoder)") || !strings.Contains(msg, "vocoder/1") || !strings.Contains(msg, "exited") {
			t.Errorf("%s's error does not name the stage, the replica and how it ended: %q", lostReq, msg)
		}
		t.Logf("%s failed %s after the kill: %s; %s finished", lostReq, took.Round(time.Millisecond), lostEv.Error.Message, okReq)
		within(t, 30*time.Second, "a new worker in the lost slot", func() bool { return front.workers(t)["vocoder/1"].pid != w.pid })
		for range 2 { // both replicas serve again
			generate(t, front.url, "The slot is back.")
		}
	})
	t.Run("stage server", func(t *testing.T) {
		talker, vocoder := serve(t, "--stage", "0"), serve(t, "--stage", "1")
		front := serve(t, "--config", writeFile(t, "remote.yaml", ttsWith(t, fmt.Sprintf(
			"    - {id: 0, placement: remote, endpoints: [%q]}\n    - {id: 1, placement: remote, endpoints: [%q]}\n", talker.url, vocoder.url))))
		evs, stop := events(t, context.Background(), front.url, "victim", long)
		defer stop()
		first(t, evs)
		vocoder.kill(t)
		killed := time.Now()
		lostReq, lostEv, at, _ := waitLoss(t, map[string]<-chan apijson.Event{"victim": evs})
		took := at.Sub(killed)
		if took > time.Second {
			t.Errorf("the loss showed %s after the kill, want within 1s", took)
		}
		if msg := lostEv.Error.Message; !strings.Contains(msg, "stage 1 (vocoder)") || !strings.Contains(msg, "vocoder/0") || !strings.Contains(msg, vocoder.url) {
			t.Errorf("%s's error does not name the stage, the replica and its server: %q", lostReq, msg)
		}
		t.Logf("%s failed %s after the kill: %s", lostReq, took.Round(time.Millisecond), lostEv.Error.Message)
		serve(t, "--stage", "1", "--addr", vocoder.addr)
		within(t, 30*time.Second, "the stage to serve again", func() bool {
			resp, err := http.Post(front.url+"/v1/generate", "application/json", strings.NewReader(`{"input": "Back again."}`))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if !idle(t, talker.url, "", 0) {
			t.Error("the talker's server holds a request after the loss")
		}
	})
}

// first waits for a request's first output event.
func first(t *testing.T, evs <-chan apijson.Event) {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok || ev.Type != apijson.EventOutput {
			t.Fatalf("first event %+v (open %v)", ev, ok)
		}
	case <-time.After(time.Minute):
		t.Fatal("no output within a minute")
	}
}

// waitLoss reads the requests' events to their ends: exactly one must end
// with a replica_lost error, the others with done. It returns the lost
// one's name, error event and the time it came, and a finished one's name.
func waitLoss(t *testing.T, reqs map[string]<-chan apijson.Event) (lost string, lostEv apijson.Event, at time.Time, ok string) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	ends := map[string]apijson.Event{}
	times := map[string]time.Time{}
	for name, evs := range reqs {
		wg.Go(func() {
			var last apijson.Event
			for ev := range evs {
				last = ev
			}
			mu.Lock()
			ends[name], times[name] = last, time.Now()
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, ev := range ends {
		switch {
		case ev.Type == apijson.EventError && ev.Error != nil && ev.Error.Code == "replica_lost":
			t.Logf("%s: %s", name, ev.Error.Message)
			if lost != "" {
				t.Errorf("%s and %s both lost", lost, name)
			}
			lost, lostEv, at = name, ev, times[name]
		case ev.Type == apijson.EventDone:
			ok = name
		default:
			t.Errorf("%s ended with %+v (error %+v)", name, ev, ev.Error)
		}
	}
	if lost == "" {
		t.Fatalf("no request was lost: %+v", ends)
	}
	return lost, lostEv, at, ok
}

// TestAbortMidStream aborts a request while it streams through a worker
// process and through a stage server: every server ends with no request
// in flight and no binding held, the stage server within 500 ms of the
// front end's abort returning (far sooner than any of its timeouts).
func TestAbortMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers with the real engines")
	}
	long := strings.Repeat(committee+" ", 3)
	vocoder := serve(t, "--stage", "1")
	for _, tc := range []struct{ name, deploy string }{
		{"process", "    - {id: 1, placement: process}\n"},
		{"remote", fmt.Sprintf("    - {id: 1, placement: remote, endpoints: [%q]}\n", vocoder.url)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front := serve(t, "--config", writeFile(t, tc.name+".yaml", ttsWith(t, tc.deploy)))
			for i := range 3 {
				id := fmt.Sprintf("abort-%d", i)
				evs, stop := events(t, context.Background(), front.url, id, long)
				first(t, evs)
				req, _ := http.NewRequest(http.MethodDelete, front.url+"/v1/requests/"+id, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("DELETE: %d", resp.StatusCode)
				}
				for range evs {
				}
				stop()
				if !idle(t, front.url, "", 0, 1, 2) {
					t.Error("the front end holds a request or a binding after the abort returned")
				}
				url, key := vocoder.url, ""
				if tc.name == "process" {
					w := front.workers(t)["vocoder/0"]
					url, key = w.url, w.key
				}
				took := within(t, time.Second, "the vocoder's server to be idle", func() bool { return idle(t, url, key, 1) })
				t.Logf("abort %d: the vocoder's server was idle %s after the front end's abort returned", i, took)
				// Released by the abort, not by a timeout (the hop's are
				// seconds); 15-30 ms on a quiet machine, up to 210 ms seen
				// under load from other tests.
				if took > 500*time.Millisecond {
					t.Errorf("the vocoder's server held the hop %s after the abort, want within 500 ms", took)
				}
			}
		})
	}
}
