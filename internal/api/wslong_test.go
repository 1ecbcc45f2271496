package api

// A long session fed by a simulated LLM on the built-in pipeline: no
// audio lost, each turn's audio that of its text spoken whole, memory flat.

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// llmSentences are what the simulated LLM says, in turn.
var llmSentences = []string{
	"Sure, I can help with that.",
	"The train leaves at 8:15 from platform nine.",
	"It costs about $42.50 one way.",
	"Would you like me to book a seat?",
	"I can also check the return times for you.",
	"Let me know if anything else comes up!",
}

// llmTurn is turn i of the simulated LLM: three sentences.
func llmTurn(i int) string {
	var s []string
	for k := range 3 {
		s = append(s, llmSentences[(3*i+k)%len(llmSentences)])
	}
	return strings.Join(s, " ")
}

// TestSpeechStreamLongSession runs a session of several turns, each
// streamed word by word at a sentence every interval (100 ms here;
// OMNISTAGE_WS_SOAK=10m runs it for that long at a sentence every 2 s, and
// reports the memory), and checks that every turn's audio is all there
// and byte for byte that of its text posted whole, and that the server's
// heap does not grow across the session.
func TestSpeechStreamLongSession(t *testing.T) {
	length, interval := 3*900*time.Millisecond, 100*time.Millisecond
	if v := os.Getenv("OMNISTAGE_WS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("OMNISTAGE_WS_SOAK=%q: %v", v, err)
		}
		length, interval = d, 2*time.Second
	}
	f := realFixture(t, "builtin:tts", "")
	whole := map[string][]byte{}
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true)
	start := time.Now()
	var heap []uint64
	sample := func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapAlloc)
		t.Logf("%6s: heap %5.1f MB, resident %s", time.Since(start).Round(time.Second), float64(ms.HeapAlloc)/1e6, resident())
	}
	nextSample := time.Now()
	for turn := 0; time.Since(start) < length; turn++ {
		text := llmTurn(turn)
		if whole[text] == nil {
			whole[text] = wholePCM(t, f, text)
		}
		// The audio is read as it comes, while the text is sent.
		done := make(chan []wsMsg, 1)
		go func() { done <- c.readUtterance() }()
		for _, sentence := range strings.SplitAfter(text, ". ") {
			words := splitWords(sentence)
			for _, w := range words {
				c.event(evText, "text", w)
				time.Sleep(interval / time.Duration(len(words)))
			}
		}
		c.event(evDone)
		h := c.utterance(<-done...)
		var sd wsSessionDone
		h.end.decode(t, &sd)
		if h.end.typ != evSessionDone || sd.UtteranceIndex != turn || sd.TotalSentences != 3 || sd.TotalBytes != int64(len(h.audio())) {
			t.Fatalf("turn %d ended with %s after %d bytes", turn, h.end.raw, len(h.audio()))
		}
		if !bytes.Equal(h.audio(), whole[text]) {
			t.Fatalf("turn %d: %d bytes streamed, %d spoken whole; they differ", turn, len(h.audio()), len(whole[text]))
		}
		if time.Now().After(nextSample) {
			sample()
			nextSample = nextSample.Add(max(length/10, time.Second))
		}
	}
	sample()
	// After the first sample (the engines warm, the caches fill), the heap
	// stays within 8 MB of it.
	if len(heap) > 2 {
		if grown := int64(heap[len(heap)-1]) - int64(heap[1]); grown > 8<<20 {
			t.Errorf("the heap grew by %.1f MB over the session", float64(grown)/1e6)
		}
	}
}

// resident returns this process's resident memory, from /proc.
func resident() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) + " MB"
		}
	}
	return "?"
}
