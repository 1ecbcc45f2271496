package acceptance

// Live input through every placement: the WebSocket's and Wyoming's
// streamed text reaching a talker in process, in a worker process and on
// a stage server, each sentence spoken before the rest of the text is
// sent, with its text, and the audio that of the text posted whole.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/engine"
)

// liveText is what the live tests stream: three sentences, a number Flite
// reads as words, a character beyond the BMP.
const liveText = "Hello there, this is omnistage. It paid $42.50 for 😀 coffee! Is that fine?"

// liveSentences are liveText's sentences as the talker cuts them.
var liveSentences = []string{"Hello there, this is omnistage.", "It paid $42.50 for 😀 coffee!", "Is that fine?"}

// liveDeadline bounds each read and write of the live clients: a failure,
// not a measure.
const liveDeadline = 60 * time.Second

// livePlacements are the fronts the live tests run against, by name: the
// built-in tts pipeline in process, with its talker, vocoder and aligner
// in worker processes, and with them on three stage servers. Each serves
// Wyoming too.
func livePlacements(tb testing.TB) map[string]*server {
	tb.Helper()
	var remote, process strings.Builder
	for id := range 3 {
		fmt.Fprintf(&process, "    - {id: %d, placement: process}\n", id)
		fmt.Fprintf(&remote, "    - {id: %d, placement: remote, endpoints: [%q]}\n", id, serve(tb, "--stage", fmt.Sprint(id)).url)
	}
	return map[string]*server{
		"in process":   serve(tb, "--wyoming", "127.0.0.1:0"),
		"worker":       serve(tb, "--wyoming", "127.0.0.1:0", "--config", writeFile(tb, "process.yaml", ttsWith(tb, process.String()))),
		"stage server": serve(tb, "--wyoming", "127.0.0.1:0", "--config", writeFile(tb, "remote.yaml", ttsWith(tb, remote.String()))),
	}
}

// TestLiveInputPlacements streams liveText word by word over the
// WebSocket and over Wyoming to the stages in process, in workers and on
// stage servers: the first sentence's audio comes before the rest of the
// text is sent, the WebSocket's audio.start events name each sentence as
// sent and its word_timestamps events are the timestamps of the text
// posted whole (each sentence's span crossed the hops: the aligner builds
// its transcript from them), and the audio, sentence after sentence, is
// byte for byte that of the text posted whole in process.
func TestLiveInputPlacements(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five servers with the real engines")
	}
	fronts := livePlacements(t)
	status, whole := postSpeech(t, fronts["in process"].url, map[string]any{"model": "tts", "input": liveText, "response_format": "pcm"})
	if status != http.StatusOK {
		t.Fatalf("POST /v1/audio/speech: %d %s", status, whole)
	}
	wholeWords := generate(t, fronts["in process"].url, liveText).words
	for _, name := range []string{"in process", "worker", "stage server"} {
		front := fronts[name]
		t.Run(name, func(t *testing.T) {
			if status, here := postSpeech(t, front.url, map[string]any{"model": "tts", "input": liveText, "response_format": "pcm"}); status != http.StatusOK || !bytes.Equal(here, whole) {
				t.Errorf("the text posted whole: %d, %d bytes; in process %d bytes", status, len(here), len(whole))
			}
			t.Run("websocket", func(t *testing.T) {
				ws := dialLive(t, front.url)
				texts, words, audio, took := ws.utterance(t, liveText)
				if !slices.Equal(texts, liveSentences) {
					t.Errorf("sentences %q, want %q", texts, liveSentences)
				}
				if !reflect.DeepEqual(words, wholeWords) {
					t.Errorf("streamed word timestamps\n%+v\nthe text posted whole\n%+v", words, wholeWords)
				}
				if !bytes.Equal(audio, whole) {
					t.Errorf("streamed audio: %d bytes; the text posted whole: %d bytes; they differ", len(audio), len(whole))
				}
				t.Logf("the first sentence's first audio came %s after the piece that ended it", took.Round(100*time.Microsecond))
			})
			t.Run("wyoming", func(t *testing.T) {
				wy := dialWyoming(t, front)
				sentences, audio := wy.stream(t, liveText)
				if sentences != len(liveSentences) {
					t.Errorf("%d audio streams, want one per sentence, %d", sentences, len(liveSentences))
				}
				if !bytes.Equal(audio, whole) {
					t.Errorf("streamed audio: %d bytes; the text posted whole: %d bytes; they differ", len(audio), len(whole))
				}
			})
		})
	}
}

// liveWS is a WebSocket session of the speech stream, pcm, audio streamed.
type liveWS struct{ conn *websocket.Conn }

func dialLive(tb testing.TB, base string) *liveWS {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveDeadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/audio/speech/stream", nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(-1)
	ws := &liveWS{conn: c}
	ws.send(tb, map[string]any{"type": "session.config", "model": "tts", "response_format": "pcm", "stream_audio": true, "word_timestamps": true})
	return ws
}

func (ws *liveWS) send(tb testing.TB, ev map[string]any) {
	tb.Helper()
	b, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), liveDeadline)
	defer cancel()
	if err := ws.conn.Write(ctx, websocket.MessageText, b); err != nil {
		tb.Fatal(err)
	}
}

// recv returns the next message: an event's type and JSON, or audio ("").
func (ws *liveWS) recv(tb testing.TB) (string, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveDeadline)
	defer cancel()
	typ, b, err := ws.conn.Read(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if typ == websocket.MessageBinary {
		return "", b
	}
	var ev struct{ Type string }
	if err := json.Unmarshal(b, &ev); err != nil {
		tb.Fatal(err)
	}
	if ev.Type == "error" {
		tb.Fatalf("error event: %s", b)
	}
	return ev.Type, b
}

// utterance streams text word by word and returns the texts of its
// sentences' audio.start events, its word timestamps and its audio. The words after the first
// sentence's end (its next sentence's first word) are sent only once the
// first sentence's audio has come: took is the time from the piece that
// ended the first sentence to that audio.
func (ws *liveWS) utterance(tb testing.TB, text string) (texts []string, words []engine.Word, audio []byte, took time.Duration) {
	tb.Helper()
	pieces := splitWords(text)
	next := secondSentence(pieces)
	var sent time.Time
	for _, w := range pieces[:next+1] {
		sent = time.Now()
		ws.send(tb, map[string]any{"type": "input.text", "text": w})
	}
	collect := func(typ string, b []byte) {
		switch typ {
		case "":
			audio = append(audio, b...)
		case "audio.start":
			var ev struct {
				SentenceText string `json:"sentence_text"`
			}
			_ = json.Unmarshal(b, &ev)
			texts = append(texts, ev.SentenceText)
		case "word_timestamps":
			var ev struct{ Words []engine.Word }
			_ = json.Unmarshal(b, &ev)
			words = append(words, ev.Words...)
		}
	}
	for {
		typ, b := ws.recv(tb)
		collect(typ, b)
		if typ == "" {
			took = time.Since(sent)
			break
		}
	}
	for _, w := range pieces[next+1:] {
		ws.send(tb, map[string]any{"type": "input.text", "text": w})
	}
	ws.send(tb, map[string]any{"type": "input.done"})
	for {
		typ, b := ws.recv(tb)
		if typ == "session.done" {
			return texts, words, audio, took
		}
		collect(typ, b)
	}
}

// splitWords cuts text before each run of white space, as an LLM streams
// its tokens.
func splitWords(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

// secondSentence returns the index of the word that begins the second
// sentence of words (whose first ends with a word that ends in '.', '!' or
// '?'): the piece with which the talker knows the first one ended.
func secondSentence(words []string) int {
	for i := 1; i < len(words); i++ {
		if strings.ContainsAny(words[i-1][len(words[i-1])-1:], ".!?") {
			return i
		}
	}
	return len(words) - 1
}

// wyomingListening matches the log line naming the Wyoming address.
var wyomingListening = regexp.MustCompile(`"msg":"wyoming server listening","addr":"([0-9.:]+)"`)

// liveWyoming is a Wyoming connection.
type liveWyoming struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialWyoming(tb testing.TB, s *server) *liveWyoming {
	tb.Helper()
	m := wyomingListening.FindStringSubmatch(s.out.String())
	if m == nil {
		tb.Fatalf("no Wyoming address in the server's log:\n%s", s.out)
	}
	conn, err := net.DialTimeout("tcp", m[1], liveDeadline)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return &liveWyoming{conn: conn, r: bufio.NewReader(conn)}
}

// write sends an event of typ with data.
func (w *liveWyoming) write(tb testing.TB, typ string, data map[string]any) {
	tb.Helper()
	line, _ := json.Marshal(map[string]any{"type": typ, "data": data, "version": "1.7.0"})
	_ = w.conn.SetWriteDeadline(time.Now().Add(liveDeadline))
	if _, err := w.conn.Write(append(line, '\n')); err != nil {
		tb.Fatal(err)
	}
}

// read returns the next event's type and payload.
func (w *liveWyoming) read(tb testing.TB) (string, []byte) {
	tb.Helper()
	_ = w.conn.SetReadDeadline(time.Now().Add(liveDeadline))
	line, err := w.r.ReadBytes('\n')
	if err != nil {
		tb.Fatal(err)
	}
	var h struct {
		Type          string          `json:"type"`
		Data          json.RawMessage `json:"data"`
		DataLength    int             `json:"data_length"`
		PayloadLength int             `json:"payload_length"`
	}
	if err := json.Unmarshal(line, &h); err != nil {
		tb.Fatalf("header %q: %v", line, err)
	}
	rest := make([]byte, h.DataLength+h.PayloadLength)
	if _, err := io.ReadFull(w.r, rest); err != nil {
		tb.Fatal(err)
	}
	if h.Type == "error" {
		tb.Fatalf("error event: %s %s", line, rest)
	}
	return h.Type, rest[h.DataLength:]
}

// stream synthesizes text in the streaming form, word by word, and
// returns how many audio streams (sentences) came and their audio. As
// for the WebSocket, the words after the first sentence's next one are
// sent once its audio has begun.
func (w *liveWyoming) stream(tb testing.TB, text string) (sentences int, audio []byte) {
	tb.Helper()
	words := splitWords(text)
	next := secondSentence(words)
	w.write(tb, "synthesize-start", map[string]any{})
	for _, word := range words[:next+1] {
		w.write(tb, "synthesize-chunk", map[string]any{"text": word})
	}
	for {
		typ, payload := w.read(tb)
		if typ == "audio-start" {
			sentences++
		}
		if typ == "audio-chunk" {
			audio = append(audio, payload...)
			break
		}
	}
	for _, word := range words[next+1:] {
		w.write(tb, "synthesize-chunk", map[string]any{"text": word})
	}
	w.write(tb, "synthesize-stop", map[string]any{})
	for {
		switch typ, payload := w.read(tb); typ {
		case "audio-start":
			sentences++
		case "audio-chunk":
			audio = append(audio, payload...)
		case "synthesize-stopped":
			return sentences, audio
		}
	}
}
