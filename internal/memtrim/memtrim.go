// Package memtrim gives back to the operating system the memory that big
// requests leave behind, once the server has gone quiet, and bounds what
// they can leave behind meanwhile.
//
// # Where the memory sits
//
// Flite (and PocketSphinx) allocate with glibc's malloc, from whichever
// thread the Go runtime runs the cgo call on, and glibc gives such
// threads arenas of their own, up to eight per core. One long utterance
// allocates hundreds of megabytes there (its items, features and tracks,
// millions of small chunks) and frees them when done; glibc keeps the
// freed memory in the arena for reuse rather than return it (the chunks
// lie in fast bins and free lists, not at the top of the heap), and the
// next big request, on another thread, fills another arena. The 10 KB
// '99999 ' input, refused at the 600 s audio limit, left 0.5–0.9 GB
// resident after one request and 2.1 GB after five; malloc_info showed
// nearly all of it as free chunks of glibc's arenas (one arena alone
// holding 392 MB, all free), with under 60 MB in the Go heap.
//
// # What the package does
//
// Loading the package caps glibc's arenas at the number of CPUs the
// process may run on (mallopt M_ARENA_MAX, from a C constructor, so that
// the cap precedes the Go runtime's threads), unless the environment sets
// a cap (MALLOC_ARENA_MAX, or glibc.malloc.arena_max in GLIBC_TUNABLES).
// Threads then share arenas, and free memory is reused by the next request
// instead of piling up in a new arena: back-to-back big requests level off
// at about the memory of the biggest one instead of growing. It also turns
// glibc's fast bins off (M_MXFAST 0, unless GLIBC_TUNABLES sets
// glibc.malloc.mxfast): a freed chunk is merged with its free neighbours
// at once, rather than left in a fast bin for a trim to merge, so a trim
// has little left to do but return whole pages. After the 10 KB input (on
// a loaded 2-core machine, six runs each way) the trim of the C heap took
// 23–117 ms instead of 82–163 ms; the memory before it (0.3–0.7 GB) and
// the speech pipeline's CPU per request did not change measurably.
//
// A Trimmer returns the free memory once the process is quiet. It is told
// when the process becomes busy (a request starts while none is in
// flight) and idle (the last request in flight ends). Once it has stayed
// idle for the quiet period (DefaultQuiet), the Trimmer trims once, in
// steps: the Go heap (debug.FreeOSMemory), then every malloc arena
// (malloc_trim(0)). It trims again only after another busy period. A
// request that starts during the quiet period cancels the trim, so steady
// load, which leaves no quiet period, pays nothing.
//
// A request never waits for a trim: the Trimmer's Busy and Idle, which
// admission calls, only note the change and return, and the trim runs on
// a goroutine of its own. A request that starts while a trim runs makes it
// give up the steps it has not begun (the next quiet period trims again);
// only the step under way finishes, and while the C heap's runs, it holds
// each arena's lock as it walks that arena, so a new request's first
// malloc in that arena waits for it, up to the step's length (above).
package memtrim

/*
#include <malloc.h>

#include "arenas.h"

static int omni_trim(void) { return malloc_trim(0); }
*/
import "C"

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultQuiet is how long the process must stay idle before a trim.
const DefaultQuiet = time.Second

// Step is one step of a trim.
type Step struct {
	// Name names the step in the log ("go_heap", "c_heap").
	Name string
	// Run does the step.
	Run func()
}

// Steps are the steps of a trim, in order: the Go heap's free memory (a
// full garbage collection, then the return of its free pages), then the
// free memory of glibc's malloc arenas (a walk of every arena's free
// chunks).
var Steps = []Step{
	{"go_heap", debug.FreeOSMemory},
	{"c_heap", func() { C.omni_trim() }},
}

// ArenaLimit returns the cap on glibc malloc's arenas that loading the
// package set (the CPUs the process may run on), or 0 when the
// environment set one.
func ArenaLimit() int { return int(C.omni_arena_limit()) }

// FastBinsOff reports whether loading the package turned glibc's fast
// bins off (false when the environment sets their size).
func FastBinsOff() bool { return C.omni_fastbins_off() != 0 }

// Options configure a Trimmer.
type Options struct {
	// Quiet is how long the process must stay idle before a trim; zero
	// means DefaultQuiet.
	Quiet time.Duration
	// Logger gets a debug line per trim; nil discards it.
	Logger *slog.Logger
	// Registerer receives the trim metrics; nil for none.
	Registerer prometheus.Registerer

	// steps replaces Steps in tests.
	steps []Step
}

// Trimmer trims the process's memory once it has gone quiet after a busy
// period (see the package doc). Its methods may be called concurrently,
// and Busy and Idle never wait.
type Trimmer struct {
	quiet    time.Duration
	steps    []Step
	log      *slog.Logger
	trims    prometheus.Counter
	yielded  prometheus.Counter
	duration prometheus.Counter

	mu     sync.Mutex
	busy   int         // the sources (a server's orchestrators) busy now
	dirty  bool        // a busy period ended with no whole trim since
	timer  *time.Timer // the pending trim; nil when none
	gen    uint64      // bumped by Busy, so a timer that fired late does nothing and a trim under way stops
	closed bool
	wg     sync.WaitGroup // the pending or running trim
}

// New returns a Trimmer. Close stops it.
func New(opts Options) (*Trimmer, error) {
	t := &Trimmer{quiet: opts.Quiet, steps: opts.steps, log: opts.Logger}
	if t.quiet <= 0 {
		t.quiet = DefaultQuiet
	}
	if t.steps == nil {
		t.steps = Steps
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.trims = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "omnistage_memory_trims_total",
		Help: "Trims of the Go and C heaps after the process went quiet, done to the end.",
	})
	t.yielded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "omnistage_memory_trims_yielded_total",
		Help: "Trims given up before their last step because a request began.",
	})
	t.duration = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "omnistage_memory_trim_seconds_total",
		Help: "Time spent trimming the Go and C heaps.",
	})
	if r := opts.Registerer; r != nil {
		for _, c := range []prometheus.Collector{t.trims, t.yielded, t.duration} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("memtrim: %w", err)
			}
		}
	}
	return t, nil
}

// Busy says a request started while none was in flight in one of the
// Trimmer's sources (the orchestrators of a server, each calling Busy and
// Idle in turn): a pending trim is cancelled, and one under way stops
// after its current step.
func (t *Trimmer) Busy() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy++
	t.gen++
	t.dirty = true
	if t.timer != nil && t.timer.Stop() {
		t.wg.Done()
	}
	t.timer = nil
}

// Idle says the last request in flight of a source ended: once no source
// is busy, a trim follows after the quiet period, unless Busy comes first.
func (t *Trimmer) Idle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy = max(t.busy-1, 0)
	if t.closed || !t.dirty || t.timer != nil || t.busy > 0 {
		return
	}
	gen := t.gen
	t.wg.Add(1)
	t.timer = time.AfterFunc(t.quiet, func() {
		defer t.wg.Done()
		t.fire(gen)
	})
}

// fire trims, step by step, while the process stays as quiet as when the
// timer of generation gen was set (and t open).
func (t *Trimmer) fire(gen uint64) {
	t.mu.Lock()
	if t.closed || gen != t.gen {
		t.mu.Unlock()
		return
	}
	t.timer = nil
	t.mu.Unlock()

	before := rss()
	took := make([]any, 0, 2*len(t.steps)+4)
	var total time.Duration
	done := 0
	for _, s := range t.steps {
		if !t.quietSince(gen) {
			break
		}
		start := time.Now()
		s.Run()
		d := time.Since(start)
		total += d
		took = append(took, s.Name+"_took", d.String())
		done++
	}
	t.duration.Add(total.Seconds())
	t.mu.Lock()
	whole := done == len(t.steps) && gen == t.gen
	if whole {
		t.dirty = false
	}
	t.mu.Unlock()
	if whole {
		t.trims.Inc()
	} else {
		t.yielded.Inc()
	}
	t.log.Debug("memory trimmed", append(took, "whole", whole, "rss_before_bytes", before, "rss_after_bytes", rss())...)
}

// quietSince reports whether no source became busy since generation gen,
// and t is open.
func (t *Trimmer) quietSince(gen uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.closed && gen == t.gen
}

// Close cancels a pending trim and waits for a running one, which stops
// after its current step.
func (t *Trimmer) Close() {
	t.mu.Lock()
	t.closed = true
	if t.timer != nil && t.timer.Stop() {
		t.wg.Done()
	}
	t.timer = nil
	t.mu.Unlock()
	t.wg.Wait()
}

// rss returns the process's resident set size in bytes, or -1 when
// /proc/self/statm cannot be read.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
