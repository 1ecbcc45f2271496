package flite

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// rssBytes reads the process's resident set size from /proc.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	f := bytes.Fields(b)
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestNoLeak runs 2000 talker+vocoder requests over every voice, with the
// error paths and the exported helpers, and checks that neither the C heap
// (glibc's count of bytes in use over all arenas) nor the process's RSS
// grows: every cst object is freed. (The C layer alone was also run under
// valgrind: no leaks and no memory errors.)
func TestNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: 2000 requests")
	}
	// Every C call of this test runs on one OS thread (the engines call C
	// from the calling goroutine), so one thread's malloc cache, not those
	// of whichever threads the goroutine visits, moves the count.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type pair struct{ talker, vocoder engine.Engine }
	pairs := map[string]pair{}
	for _, voice := range Voices() {
		pairs[voice] = pair{talkerFor(t, voice), vocoderFor(t, voice)}
	}
	bad := engine.Chunk{Frames: &engine.Frames{Voice: "slt", Channels: 26, StrChannels: 5, FrameShift: 0.005}}
	request := func(i int) {
		// Seven in ten requests use the fast diphone voice to keep the
		// test short; the others cycle through the clustergen voices.
		voice := "kal16"
		if i%10 >= 7 {
			voice = Voices()[i%3]
		}
		p := pairs[voice]
		s := fmt.Sprintf("Hi %d. Yes!", i%7)
		mid, out := speak(t, p.talker, p.vocoder, s, "", "")
		if len(mid) != 2 || len(out) < 2 { // speak checked the blocks
			t.Fatalf("request %d: %d sentences, %d audio chunks", i, len(mid), len(out))
		}
		if _, err := run(p.talker, "", text("?! --")); err == nil {
			t.Fatal("punctuation accepted")
		}
		if _, err := run(pairs["slt"].vocoder, "", bad); err == nil {
			t.Fatal("bad frames accepted")
		}
		if i%20 == 0 {
			if _, err := Analyze(s, voice); err != nil {
				t.Fatal(err)
			}
			if _, _, err := SynthesizeTimed(s, voice, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle := func() (int64, int64) {
		runtime.GC()
		debug.FreeOSMemory()
		return cHeapInUse(), rssBytes(t)
	}
	// malloc's per-thread caches fill up over the first few hundred
	// requests (the count levels off, it does not climb); a leak shows as
	// steady growth between the last two checkpoints.
	const warm, mid, total = 500, 1250, 2000
	for i := range warm {
		request(i)
	}
	heap0, rss0 := settle()
	for i := warm; i < mid; i++ {
		request(i)
	}
	heap1, _ := settle()
	for i := mid; i < total; i++ {
		request(i)
	}
	heap2, rss2 := settle()
	t.Logf("C heap in use after %d, %d, %d requests: %d, %d, %d bytes; RSS %.1f MB then %.1f MB",
		warm, mid, total, heap0, heap1, heap2, float64(rss0)/1e6, float64(rss2)/1e6)
	// The count moves by a few KB as malloc's caches settle. Leaking one
	// small cst object (a 96-byte feature pair) per request would add 72 KB
	// over the last 750 requests; an utterance or a wave far more.
	if grow := heap2 - heap1; grow > 32<<10 {
		t.Errorf("C heap grew by %d bytes over the last %d requests", grow, total-mid)
	}
	// RSS also moves with the Go heap and malloc's arenas; only a real leak
	// would add this much.
	if grow := rss2 - rss0; grow > 16<<20 {
		t.Errorf("RSS grew by %.1f MB over %d requests", float64(grow)/1e6, total-warm)
	}
}
