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
	tr, err := New(Options{Quiet: quiet, Registerer: reg, trim: func() (time.Duration, time.Duration) {
		n.Add(1)
		return time.Millisecond, 2 * time.Millisecond
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
				if got, want := testutil.ToFloat64(tr.duration), float64(c.want)*0.003; got < want-1e-9 || got > want+1e-9 {
					t.Errorf("omnistage_memory_trim_seconds_total = %g, want %g", got, want)
				}
			})
		})
	}
}

// TestCloseWaitsForTrim checks Close returns only after a running trim.
func TestCloseWaitsForTrim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		tr, err := New(Options{Quiet: quiet, trim: func() (time.Duration, time.Duration) {
			close(started)
			<-release
			return 0, 0
		}})
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

// TestTrim runs the real trim.
func TestTrim(t *testing.T) {
	goHeap, cHeap := Trim()
	if goHeap <= 0 || cHeap <= 0 {
		t.Errorf("Trim took %v and %v; want positive durations", goHeap, cHeap)
	}
	if rss() <= 0 {
		t.Errorf("rss() = %d", rss())
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
