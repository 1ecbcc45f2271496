package memtrim

import (
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const quiet = time.Second

// counting returns a Trimmer whose trims are counted in n instead of
// done.
func counting(t *testing.T, n *atomic.Int32, reg prometheus.Registerer) *Trimmer {
	t.Helper()
	tr, err := New(Options{Quiet: quiet, Registerer: reg, steps: []Step{
		{"go_heap", func() {}},
		{"c_heap", func() { n.Add(1) }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The steps of TestRule advance the bubble's fake clock: time.Sleep there
// waits for no one.
func TestRule(t *testing.T) {
	cases := []struct {
		name  string
		steps func(t *testing.T, tr *Trimmer, n *atomic.Int32)
		want  int32
	}{
		{"a busy period then quiet", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			time.Sleep(quiet)
		}, 1},
		{"not quiet long enough", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			time.Sleep(quiet - time.Millisecond)
		}, 0},
		{"busy again during the quiet period", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			time.Sleep(quiet / 2)
			tr.Busy()
			time.Sleep(2 * quiet)
		}, 0},
		{"the quiet period starts again at idle", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			time.Sleep(quiet / 2)
			tr.Busy()
			tr.Idle()
			time.Sleep(quiet / 2)
			synctest.Wait()
			if n.Load() != 0 {
				t.Error("trimmed before a whole quiet period after the last idle")
			}
			time.Sleep(quiet / 2)
		}, 1},
		{"idle without a busy period", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Idle()
			time.Sleep(2 * quiet)
		}, 0},
		{"once per busy period", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			time.Sleep(2 * quiet)
			tr.Idle()
			time.Sleep(2 * quiet)
		}, 1},
		{"two busy periods", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			for range 2 {
				tr.Busy()
				tr.Idle()
				time.Sleep(2 * quiet)
			}
		}, 2},
		{"two sources: quiet only once both are idle", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy() // one pipeline
			tr.Busy() // another
			tr.Idle() // the first is idle, the second still busy
			time.Sleep(2 * quiet)
			synctest.Wait()
			if n.Load() != 0 {
				t.Error("trimmed while a source was busy")
			}
			tr.Idle()
			time.Sleep(quiet)
		}, 1},
		{"closed while pending", func(t *testing.T, tr *Trimmer, n *atomic.Int32) {
			tr.Busy()
			tr.Idle()
			tr.Close()
			time.Sleep(2 * quiet)
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				reg := prometheus.NewRegistry()
				tr := counting(t, &n, reg)
				c.steps(t, tr, &n)
				synctest.Wait()
				tr.Close()
				if got := n.Load(); got != c.want {
					t.Errorf("%d trims, want %d", got, c.want)
				}
				if got := testutil.ToFloat64(tr.trims); got != float64(c.want) {
					t.Errorf("omnistage_memory_trims_total = %g, want %d", got, c.want)
				}
			})
		})
	}
}

// TestCloseWaitsForTrim checks Close returns only after a running trim.
func TestCloseWaitsForTrim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		tr, err := New(Options{Quiet: quiet, steps: []Step{{"go_heap", func() {
			close(started)
			<-release
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		tr.Busy()
		tr.Idle()
		<-started
		closed := make(chan struct{})
		go func() {
			tr.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a trim was running")
		default:
		}
		close(release)
		<-closed
	})
}

// TestTrim runs the real steps.
func TestTrim(t *testing.T) {
	for _, s := range Steps {
		s.Run()
	}
	if rss() <= 0 {
		t.Errorf("rss() = %d", rss())
	}
}

// TestBusyDuringTrim: admission does not wait for a trim under way. Busy,
// which an orchestrator calls as it admits a request while none is in
// flight, returns while a step of the trim is still running (were it to
// wait, every goroutine of the bubble would be blocked, and synctest
// fails the test). The trim then gives up the steps it has not begun, and
// the next quiet period trims again, whole.
func TestBusyDuringTrim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		running, release := make(chan struct{}), make(chan struct{})
		var goRuns, cRuns atomic.Int32
		reg := prometheus.NewRegistry()
		tr, err := New(Options{Quiet: quiet, Registerer: reg, steps: []Step{
			{"go_heap", func() {
				if goRuns.Add(1) == 1 {
					close(running)
					<-release
				}
			}},
			{"c_heap", func() {
				cRuns.Add(1)
				time.Sleep(3 * time.Millisecond) // of the bubble's clock
			}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.Busy()
		tr.Idle()
		<-running // the trim's first step is under way, and waits for release
		tr.Busy() // a request is admitted meanwhile
		close(release)
		synctest.Wait()
		if cRuns.Load() != 0 || testutil.ToFloat64(tr.yielded) != 1 || testutil.ToFloat64(tr.trims) != 0 {
			t.Fatalf("after a request began during the trim: %d c_heap steps, %g yielded, %g whole; want the trim given up", cRuns.Load(), testutil.ToFloat64(tr.yielded), testutil.ToFloat64(tr.trims))
		}
		tr.Idle()
		time.Sleep(quiet + 10*time.Millisecond)
		synctest.Wait()
		if goRuns.Load() != 2 || cRuns.Load() != 1 || testutil.ToFloat64(tr.trims) != 1 {
			t.Fatalf("after the next quiet period: %d go_heap and %d c_heap steps, %g whole trims; want one whole trim more", goRuns.Load(), cRuns.Load(), testutil.ToFloat64(tr.trims))
		}
		if got := testutil.ToFloat64(tr.duration); got != 0.003 {
			t.Errorf("omnistage_memory_trim_seconds_total = %g, want the c_heap step's 0.003", got)
		}
	})
}

// TestFastBinsOff: loading the package turned glibc's fast bins off,
// unless the environment sets their size.
func TestFastBinsOff(t *testing.T) {
	want := !strings.Contains(os.Getenv("GLIBC_TUNABLES"), "glibc.malloc.mxfast")
	if got := FastBinsOff(); got != want {
		t.Errorf("FastBinsOff() = %v, want %v", got, want)
	}
}

func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	var n atomic.Int32
	counting(t, &n, reg).Close()
	if _, err := New(Options{Registerer: reg}); err == nil {
		t.Error("registering the metrics twice did not fail")
	}
}

func TestArenaLimit(t *testing.T) {
	want := runtime.NumCPU()
	if os.Getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(os.Getenv("GLIBC_TUNABLES"), "arena_max") {
		want = 0
	}
	if got := ArenaLimit(); got != want {
		t.Errorf("ArenaLimit() = %d, want %d", got, want)
	}
}
