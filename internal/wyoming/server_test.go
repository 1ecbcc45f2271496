package wyoming

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/testkit"
)

// TestDescribe: info has one tts program that streams, whose voices are
// the talkers', the default pipeline's by name and the other's prefixed.
func TestDescribe(t *testing.T) {
	f := serve(t, Options{})
	c := dial(t, f.addr)
	c.send("describe", nil)
	ev := c.expect("info")
	tts, _ := ev.Data["tts"].([]any)
	if len(tts) != 1 {
		t.Fatalf("tts %v: want one program", ev.Data["tts"])
	}
	prog := tts[0].(map[string]any)
	if prog["name"] != "omnistage" || prog["installed"] != true || prog["supports_synthesize_streaming"] != true {
		t.Errorf("program %v", prog)
	}
	if att, _ := prog["attribution"].(map[string]any); att["name"] == nil || att["url"] == "" || att["url"] == nil {
		t.Errorf("program attribution %v: want a name and a url", prog["attribution"])
	}
	if v, _ := prog["version"].(string); v == "" {
		t.Errorf("program version %v: want one, as wyoming-piper gives its", prog["version"])
	}
	type voice struct{ name, lang, attribution, description string }
	var got []voice
	for _, v := range prog["voices"].([]any) {
		m := v.(map[string]any)
		if m["installed"] != true {
			t.Errorf("voice %v not installed", m)
		}
		langs := m["languages"].([]any)
		if len(langs) != 1 {
			t.Fatalf("voice %v: want one language", m)
		}
		att := m["attribution"].(map[string]any)
		if u, _ := att["url"].(string); u == "" || m["version"] == nil {
			t.Errorf("voice %v: want an attribution url and a version", m)
		}
		got = append(got, voice{m["name"].(string), langs[0].(string), att["name"].(string), m["description"].(string)})
	}
	want := []voice{
		{"amy", "en-US", "test-speaker", "Amy, female"},
		{"bob", "de-DE", "test-speaker", "Bob, male"},
		{"alt/amy", "en-US", "test-speaker", "Amy, female (pipeline alt)"},
		{"alt/bob", "de-DE", "test-speaker", "Bob, male (pipeline alt)"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("voices\n%v\nwant\n%v", got, want)
	}
	for _, k := range []string{"asr", "handle", "intent", "wake", "mic", "snd"} {
		if l, ok := ev.Data[k].([]any); !ok || len(l) != 0 {
			t.Errorf("info %s: %v, want an empty list", k, ev.Data[k])
		}
	}
	// The connection serves more events.
	c.sendInline("describe", nil)
	c.expect("info")
}

// TestSynthesize: a synthesize is one audio stream of the pipeline's
// audio, the same samples as the pipeline makes asked directly, in
// chunks of at most 100 ms with their timestamps, in the voice and
// pipeline it names.
func TestSynthesize(t *testing.T) {
	f := serve(t, Options{})
	text := "Hello there. " + strings.Repeat("A long sentence of many words, ", 200) + "end! And a tail"
	cases := []struct {
		name  string
		voice map[string]any
		rate  int
		k     int16
	}{
		{"the default voice", nil, 16000, 1},
		{"a voice by name", map[string]any{"name": "bob"}, 16000, 2},
		{"names match in any case", map[string]any{"name": "BOB", "speaker": "ignored"}, 16000, 2},
		{"another pipeline's voice", map[string]any{"name": "alt/bob"}, 24000, 2},
		{"an alias", map[string]any{"name": "Bobby"}, 16000, 2},
		{"another pipeline's alias", map[string]any{"name": "alt/robert"}, 24000, 2},
		{"a pipeline by name", map[string]any{"name": "alt"}, 24000, 1},
		{"a voice by language", map[string]any{"language": "de"}, 16000, 2},
		{"a language with an underscore", map[string]any{"language": "en_US"}, 16000, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, f.addr)
			data := map[string]any{"text": text}
			if tc.voice != nil {
				data["voice"] = tc.voice
			}
			c.send("synthesize", data)
			a := c.readAudio("audio-stop")
			if a.rate != tc.rate || len(a.streams) != 1 {
				t.Fatalf("%d streams at %d Hz; want one at %d", len(a.streams), a.rate, tc.rate)
			}
			want := slices.Concat(spoken(text, tc.k)...)
			if !slices.Equal(a.joined(), want) {
				t.Fatalf("heard %d samples, want %d", len(a.joined()), len(want))
			}
			if tc.k == 1 && tc.rate == 16000 && !slices.Equal(a.joined(), direct(t, f.orchs[0], text)) {
				t.Error("the audio is not the pipeline's for the same text")
			}
			// The connection takes another synthesis.
			c.send("synthesize", map[string]any{"text": "Again."})
			if got := c.readAudio("audio-stop").joined(); !slices.Equal(got, spoken("Again.", 1)[0]) {
				t.Errorf("second synthesis: %v", got)
			}
		})
	}
}

// TestSynthesizeNothing: text with nothing to say is an empty audio
// stream: its audio-stop.
func TestSynthesizeNothing(t *testing.T) {
	f := serve(t, Options{})
	c := dial(t, f.addr)
	c.send("synthesize", map[string]any{"text": "  \n"})
	c.expect("audio-stop")
	c.send("synthesize-start", nil)
	c.send("synthesize-stop", nil)
	c.expect("synthesize-stopped")
}

// TestStream: the streaming form speaks the text of its pieces, however
// they split it, sentence by sentence (an audio stream each), ignores the
// whole text sent again for older servers, and ends with
// synthesize-stopped; the connection then takes more.
func TestStream(t *testing.T) {
	f := serve(t, Options{})
	text := "Hi. How are you? Fine, thanks!  And you"
	c := dial(t, f.addr)
	for _, split := range []int{1, 2, 3, 7, len(text)} {
		c.send("synthesize-start", map[string]any{"voice": map[string]any{"name": "alt/bob"}})
		for i := 0; i < len(text); i += split {
			c.send("synthesize-chunk", map[string]any{"text": text[i:min(i+split, len(text))]})
		}
		c.send("synthesize", map[string]any{"text": text, "voice": map[string]any{"name": "alt/bob"}})
		c.send("synthesize-stop", nil)
		a := c.readAudio("synthesize-stopped")
		if want := spoken(text, 2); a.rate != 24000 || !slices.EqualFunc(a.streams, want, slices.Equal) {
			t.Fatalf("pieces of %d bytes: %d streams at %d Hz %v; want %v at 24000", split, len(a.streams), a.rate, a.streams, want)
		}
	}
	c.send("synthesize", map[string]any{"text": "Whole."})
	c.readAudio("audio-stop")
}

// TestProtocolErrors: each event that cannot be done is answered with an
// error event, and the connection goes on as if it had not come.
func TestProtocolErrors(t *testing.T) {
	f := serve(t, Options{MaxHeaderBytes: 1024, MaxDataBytes: 512, MaxPayloadBytes: 256})
	cases := []struct {
		name string
		send func(c *client)
		code string
	}{
		{"not JSON", func(c *client) { c.raw([]byte("synthesize hello\n")) }, CodeMalformed},
		{"no type", func(c *client) { c.raw([]byte(`{"data":{"text":"x"}}` + "\n")) }, CodeMalformed},
		{"a header over the limit", func(c *client) { c.sendInline("synthesize", map[string]any{"text": strings.Repeat("a", 2000)}) }, CodeMalformed},
		{"data over the limit", func(c *client) { c.send("synthesize", map[string]any{"text": strings.Repeat("a", 600)}) }, CodeMalformed},
		{"a payload over the limit", func(c *client) {
			c.raw([]byte(`{"type":"audio-chunk","payload_length":300}` + "\n" + strings.Repeat("p", 300)))
		}, CodeMalformed},
		{"data that is not an object", func(c *client) { c.raw([]byte(`{"type":"synthesize","data_length":4}` + "\n[1] ")) }, CodeMalformed},
		{"a synthesize without text", func(c *client) { c.send("synthesize", map[string]any{"voice": map[string]any{"name": "amy"}}) }, CodeMalformed},
		{"text that is not a string", func(c *client) { c.send("synthesize", map[string]any{"text": 5}) }, CodeMalformed},
		{"a voice that is not an object", func(c *client) { c.send("synthesize", map[string]any{"text": "x", "voice": "amy"}) }, CodeMalformed},
		{"a voice name that is not a string", func(c *client) {
			c.send("synthesize-start", map[string]any{"voice": map[string]any{"name": 1}})
		}, CodeMalformed},
		{"a chunk outside a stream", func(c *client) { c.send("synthesize-chunk", map[string]any{"text": "x"}) }, CodeUnexpected},
		{"a stop outside a stream", func(c *client) { c.send("synthesize-stop", nil) }, CodeUnexpected},
		{"a ping whose text is not a string", func(c *client) { c.send("ping", map[string]any{"text": []int{1}}) }, CodeMalformed},
	}
	c := dial(t, f.addr)
	c.send("describe", nil) // a first line that is a Wyoming event
	c.expect("info")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			tc.send(c)
			c.expectError(tc.code)
			c.send("ping", map[string]any{"text": tc.name})
			if ev := c.expect("pong"); ev.Data["text"] != tc.name {
				t.Errorf("pong %v", ev.Data)
			}
		})
	}
	c.t = t
	// Inside a stream, a misplaced event leaves the stream as it was.
	c.send("synthesize-start", map[string]any{"voice": map[string]any{"name": "bob"}})
	c.send("synthesize-start", nil)
	c.expectError(CodeUnexpected)
	c.send("synthesize-chunk", map[string]any{"text": 3})
	c.expectError(CodeMalformed)
	c.send("synthesize-chunk", map[string]any{"text": "One. "})
	c.send("synthesize-chunk", map[string]any{"text": "Two."})
	c.send("synthesize-stop", nil)
	if a := c.readAudio("synthesize-stopped"); !slices.EqualFunc(a.streams, spoken("One. Two.", 2), slices.Equal) {
		t.Errorf("stream after the errors: %v", a.streams)
	}
	if got := gather(t, f.reg, "omnistage_wyoming_protocol_errors_total"); got != float64(len(cases)+2) {
		t.Errorf("protocol errors counted: %v, want %d", got, len(cases)+2)
	}
}

// TestCrossProtocol: a connection whose first line is no Wyoming event
// (an HTTP request, which any web page may send to this port) gets one
// error event and is closed, its body's events never run; so is one that
// sends a second malformed line with no event between, while one
// malformed line after an event is only refused.
func TestCrossProtocol(t *testing.T) {
	f := serve(t, Options{})
	body := `{"type":"synthesize","data":{"text":"Run from a web page."}}` + "\n"
	for _, tc := range []struct {
		name  string
		first []string // events before, as raw lines
		send  string
	}{
		{"an HTTP request", nil, "POST / HTTP/1.1\r\nHost: 127.0.0.1:10200\r\nContent-Type: text/plain\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body},
		{"a request line alone", nil, "GET / HTTP/1.1\r\n"},
		{"two malformed lines in a row", []string{`{"type":"ping"}`, "not an event"}, "nor this\n" + body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, f.addr)
			for _, line := range tc.first {
				c.raw([]byte(line + "\n"))
				if line == "not an event" {
					c.expectError(CodeMalformed)
				} else {
					c.expect("pong")
				}
			}
			c.raw([]byte(tc.send))
			c.expectError(CodeMalformed)
			c.expectClosed()
		})
	}
	if got := gather(t, f.reg, "omnistage_wyoming_syntheses_total"); got != 0 {
		t.Errorf("%v syntheses ran", got)
	}
}

// TestUnknownEvents: events of types the server does not serve are
// ignored, payload and all, with nothing sent back.
func TestUnknownEvents(t *testing.T) {
	f := serve(t, Options{})
	c := dial(t, f.addr)
	c.raw([]byte(`{"type":"audio-start","data":{"rate":16000,"width":2,"channels":1}}` + "\n"))
	c.raw([]byte(`{"type":"audio-chunk","data_length":2,"payload_length":6}` + "\n{}abcdef"))
	c.send("transcribe", map[string]any{"language": "en"})
	c.send("run-pipeline", map[string]any{"start_stage": "tts"})
	c.send("ping", map[string]any{"text": "still here"})
	if ev := c.expect("pong"); ev.Data["text"] != "still here" {
		t.Errorf("pong %v", ev.Data)
	}
	c.send("ping", nil)
	c.expect("pong")
}

// TestFailedSynthesis: a synthesis that fails is answered with an error
// event, the HTTP API's code for the failure, and the connection closes.
func TestFailedSynthesis(t *testing.T) {
	f := serve(t, Options{MaxTextBytes: 100})
	cases := []struct {
		name string
		send func(c *client)
		code string
	}{
		{"an unknown voice", func(c *client) {
			c.send("synthesize", map[string]any{"text": "x", "voice": map[string]any{"name": "zed"}})
		}, CodeUnknownVoice},
		{"an unknown language", func(c *client) {
			c.send("synthesize-start", map[string]any{"voice": map[string]any{"language": "fr"}})
		}, CodeUnknownVoice},
		{"text over the limit", func(c *client) { c.send("synthesize", map[string]any{"text": strings.Repeat("a", 101)}) }, CodeTextTooLong},
		{"a stream's text over the limit", func(c *client) {
			c.send("synthesize-start", nil)
			for range 3 {
				c.send("synthesize-chunk", map[string]any{"text": strings.Repeat("a", 40)})
			}
		}, CodeTextTooLong},
		{"the pipeline refuses it", func(c *client) { c.send("synthesize", map[string]any{"text": "Hi. fail. Never."}) }, "bad_request"},
		{"a stream the pipeline refuses", func(c *client) {
			c.send("synthesize-start", nil)
			c.send("synthesize-chunk", map[string]any{"text": "fail."})
			c.send("synthesize-stop", nil)
		}, "bad_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, f.addr)
			tc.send(c)
			for {
				ev := c.next()
				if ev.Type == "error" {
					if ev.Data["code"] != tc.code {
						t.Fatalf("error %v; want code %s", ev.Data, tc.code)
					}
					break
				}
				if !strings.HasPrefix(ev.Type, "audio-") {
					t.Fatalf("a %s event before the error", ev.Type)
				}
			}
			c.expectClosed()
		})
	}
}

// TestStreamSpeaksAsItComes: a stream's sentence is spoken as soon as
// the talker has its end, while the rest of the text is still to come.
func TestStreamSpeaksAsItComes(t *testing.T) {
	f := serve(t, Options{})
	c := dial(t, f.addr)
	c.send("synthesize-start", nil)
	c.send("synthesize-chunk", map[string]any{"text": " "})
	c.send("synthesize-chunk", map[string]any{"text": "First"})
	c.send("synthesize-chunk", map[string]any{"text": " one. Sec"})
	if a := c.readAudio("audio-stop"); !slices.Equal(a.joined(), spoken("First one.", 1)[0]) {
		t.Fatalf("first sentence: %v", a.joined())
	}
	c.send("synthesize-chunk", map[string]any{"text": "ond! Th"})
	if a := c.readAudio("audio-stop"); !slices.Equal(a.joined(), spoken("Second!", 1)[0]) {
		t.Fatalf("second sentence: %v", a.joined())
	}
	c.send("synthesize-chunk", map[string]any{"text": "ird"})
	c.send("synthesize-stop", nil)
	if a := c.readAudio("synthesize-stopped"); !slices.EqualFunc(a.streams, [][]int16{spoken("Third", 1)[0]}, slices.Equal) {
		t.Fatalf("the rest: %v", a.streams)
	}
}

// TestHomeAssistantStream drives a stream as Home Assistant does: one
// task writes the pieces, then the whole text again, then the stop, while
// another reads audio until synthesize-stopped.
func TestHomeAssistantStream(t *testing.T) {
	f := serve(t, Options{TextBuffer: 1})
	c := dial(t, f.addr)
	pieces := strings.SplitAfter("Turning on the kitchen lights. The living room is already on. Anything else?", " ")
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.send("synthesize-start", map[string]any{"voice": map[string]any{"name": "amy"}})
		for _, p := range pieces {
			c.send("synthesize-chunk", map[string]any{"text": p})
		}
		c.send("synthesize", map[string]any{"text": strings.Join(pieces, ""), "voice": map[string]any{"name": "amy"}})
		c.send("synthesize-stop", nil)
	}()
	a := c.readAudio("synthesize-stopped")
	<-wrote
	if want := spoken(strings.Join(pieces, ""), 1); !slices.EqualFunc(a.streams, want, slices.Equal) {
		t.Errorf("heard %v, want %v", a.streams, want)
	}
	testkit.Eventually(t, "the request to be released", func() bool { return f.inFlight(t) == 0 })
	if got := gather(t, f.reg, "omnistage_wyoming_syntheses_total"); got != 1 {
		t.Errorf("syntheses counted: %v, want 1", got)
	}
}
