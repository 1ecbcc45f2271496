package stageserver

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
)

// TestWriteFinal: the final answer, with its audio's base64 written part
// by part, is byte for byte what encoding/json writes, with its length
// declared; for audio of every length around the parts' and the buffer's
// sizes, with or without audio, and with more JSON than the buffer holds
// after it.
func TestWriteFinal(t *testing.T) {
	words := make([]engine.Word, 3000) // about 150 KB of JSON after the audio
	for i := range words {
		words[i] = engine.Word{Word: "wörd \"" + strconv.Itoa(i) + `"`, CharStart: i, CharEnd: i + 1, StartMs: 10 * i, EndMs: 10*i + 9}
	}
	s := &Server{opts: ServerOptions{WriteTimeout: DefaultWriteTimeout}}
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 100, chunkLen/4*3 - 1, chunkLen / 4 * 3, chunkLen/4*3 + 1, 200 << 10, 1<<20 + 7} {
		for _, ts := range [][]engine.Word{nil, words} {
			out := &apijson.Outputs{Timestamps: ts, Text: strings.Repeat("text with \"data\":null in it ", 3)}
			if n >= 0 {
				data := make([]byte, n)
				for i := range data {
					data[i] = byte(i * 31)
				}
				out.Audio = &apijson.Audio{Format: apijson.FormatWAV, SampleRate: 16000, DurationMs: n / 32, Data: data}
			}
			resp := &hop.RunResponse{RequestID: "r\u2028\"1", StageID: 2, Finished: true, Output: out}
			want, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			w := httptest.NewRecorder()
			if err := s.writeFinal(w, resp); err != nil {
				t.Fatal(err)
			}
			if got := w.Body.String(); got != string(want) {
				t.Fatalf("audio of %d bytes, %d words: the answer differs from encoding/json's (%d bytes, want %d)", n, len(ts), len(got), len(want))
			}
			if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
				t.Fatalf("audio of %d bytes: Content-Length %s, want %d", n, cl, len(want))
			}
			if n > 0 && resp.Output.Audio.Data == nil {
				t.Fatal("writeFinal changed the response")
			}
		}
	}
}
