package api

// A benchmark of how soon word timestamps come, against the first audio,
// on the built-in pipeline (real Flite and PocketSphinx). Run it with
//
//	go test -run '^$' -bench FirstTimestamps -benchtime 20x ./internal/api/

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
)

// committeeParagraph is the bench paragraph of the performance notes:
// six sentences of about 3 s.
const committeeParagraph = "The committee met on Tuesday to review the budget. " +
	"After a long discussion, they agreed to fund three new projects. " +
	"The first will repair the old bridge near the river. " +
	"The second will build a small library for the school. " +
	"The third will plant trees along the main road. " +
	"Work on all three should begin early next spring."

// BenchmarkFirstTimestamps posts committeeParagraph as SSE speech with word
// timestamps, one request at a time, to the built-in tts and tts-24k
// pipelines (whose aligner gets the audio resampled to 24 kHz), and
// measures from the request to its first audio delta and to its first
// speech.word_timestamps event. It reports the medians (ms) and the ratio
// of the two; the target is a ratio of at most 1.5.
func BenchmarkFirstTimestamps(b *testing.B) {
	for _, model := range []string{"tts", "tts-24k"} {
		b.Run("model="+model, func(b *testing.B) {
			f := realFixture(b, "builtin:"+model, "")
			body, _ := json.Marshal(map[string]any{"model": model, "input": committeeParagraph,
				"response_format": "pcm", "stream_format": "sse"})
			var audioT, wordsT []time.Duration
			for b.Loop() {
				firstAudio, firstWords := firstEvents(b, f, body)
				audioT, wordsT = append(audioT, firstAudio), append(wordsT, firstWords)
			}
			a, w := ms(median(audioT)), ms(median(wordsT))
			b.ReportMetric(a, "audio-ms")
			b.ReportMetric(w, "words-ms")
			b.ReportMetric(w/a, "words/audio")
		})
	}
}

// firstEvents posts body as SSE speech with word timestamps and returns
// how long its first audio delta and its first timestamps event took.
func firstEvents(b *testing.B, f *fixture, body []byte) (firstAudio, firstWords time.Duration) {
	req, err := http.NewRequest(http.MethodPost, f.url+"/v1/audio/speech", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Word-Timestamps", "true")
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apijson.SpeechEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			b.Fatal(err)
		}
		switch {
		case ev.Type == apijson.SpeechDelta && firstAudio == 0:
			firstAudio = time.Since(start)
		case ev.Type == apijson.SpeechTimestamps && firstWords == 0:
			firstWords = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil || firstAudio == 0 || firstWords == 0 {
		b.Fatalf("status %d, error %v: first audio %v, first words %v", resp.StatusCode, err, firstAudio, firstWords)
	}
	return firstAudio, firstWords
}
