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
// (glibc's count of bytes in use, exact) nor the process's RSS grows: every
// cst object is freed.
func TestNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: 2000 requests")
	}
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
		_, out := speak(t, p.talker, p.vocoder, s, "", "")
		if len(out) != 2 {
			t.Fatalf("request %d: %d audio chunks", i, len(out))
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
	const warm, total = 100, 2000
	for i := range warm {
		request(i)
	}
	heap0, rss0 := settle()
	for i := warm; i < total; i++ {
		request(i)
	}
	heap1, rss1 := settle()
	t.Logf("after %d and %d requests: C heap in use %d and %d bytes, RSS %.1f and %.1f MB",
		warm, total, heap0, heap1, float64(rss0)/1e6, float64(rss1)/1e6)
	if grow := heap1 - heap0; grow > 0 {
		t.Errorf("C heap grew by %d bytes over %d requests", grow, total-warm)
	}
	// RSS moves with the Go heap and malloc's arenas; only a real leak
	// would add this much.
	if grow := rss1 - rss0; grow > 16<<20 {
		t.Errorf("RSS grew by %.1f MB over %d requests", float64(grow)/1e6, total-warm)
	}
}
