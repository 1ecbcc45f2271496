package stagecheck

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

func TestCheckHello(t *testing.T) {
	for _, tc := range []struct {
		hello string
		stage string   // the stage's line, when the hello is valid
		bad   []string // what the problems say, when it is not
	}{
		{`{"type":"hello","protocol":1,"name":"gain","input":"audio","output":"audio","max_jobs":4,"window":2,"params":{"gain":{"type":"number","description":"a factor"}},"voices":[{"id":"en-us","name":"English","language":"en-US"}]}`,
			"gain takes audio, makes audio, 4 jobs at once (input window 2); params: gain; voices: en-us", nil},
		{`{"type":"hello","protocol":1,"input":"text","output":"phonemes"}`,
			"an unnamed stage takes text, makes phonemes, 1 job at a time (input window 8)", nil},
		{`{"type":"hello","protocol":1,"input":"audio","output":"audio","params":null,"future":{"x":1}}`,
			"an unnamed stage takes audio, makes audio, 1 job at a time (input window 8)", nil},
		{`{"type":"hello","input":"Audio","max_jobs":-1,"window":-2}`, "",
			[]string{"protocol 0: this runtime speaks 1", `input: "Audio" is not a kind`, "output: missing", "max_jobs -1 is negative", "window -2 is negative"}},
		{`{"type":"hello","protocol":1,"input":"audio","output":"audio","params":["gain"]}`, "",
			[]string{"params must be an object of param names"}},
		{`{"type":"hello","protocol":1,"input":"audio","output":"audio","params":{"gain":{"type":4}}}`, "",
			[]string{"params must be an object of param names"}},
		{`{"type":"hello","protocol":1,"input":"audio","output":"audio","params":{" ":{}}}`, "",
			[]string{"params: a param with an empty name"}},
		{`{"type":"hello","protocol":1,"input":"text","output":"audio","voices":[{"id":"a","name":"A","language":"en_US"},{"id":"a","language":"en"},{"name":"C","language":"fr"}]}`, "",
			[]string{`voice "a": language "en_US" is not a BCP 47 tag`, `voice "a": the id is used twice`, `voice "a": no name`, "voices[2]: no id"}},
	} {
		var h stageproto.Header
		if _, err := stageproto.NewReader(strings.NewReader(tc.hello + "\n")).Read(&h); err != nil {
			t.Fatalf("%s: %v", tc.hello, err)
		}
		stage, problems := checkHello(&h)
		got := strings.Join(problems, "; ")
		if tc.bad == nil {
			if len(problems) > 0 || stage.String() != tc.stage {
				t.Errorf("%s: %q, problems %q; want %q", tc.hello, stage, got, tc.stage)
			}
			continue
		}
		if len(problems) != len(tc.bad) {
			t.Errorf("%s: problems %q; want %d", tc.hello, got, len(tc.bad))
		}
		for _, w := range tc.bad {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problems %q; want one saying %q", tc.hello, got, w)
			}
		}
	}
}

func TestNewInput(t *testing.T) {
	var wav bytes.Buffer
	if err := audio.WriteWAV(&wav, &engine.Audio{SampleRate: 8000, Samples: make([]int16, 2000)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind   engine.Kind
		data   []byte
		chunks string // the chunks' kinds and sizes, or the error
	}{
		{"text", []byte("Hi there."), "text 9"},
		{"text", []byte{0xff}, "not UTF-8"},
		{"audio", wav.Bytes(), "audio 800, audio 800, audio 400, audio 0 eos"},
		{"audio", []byte("RIFF"), "the input file: wav"},
		{"frames", []byte{1}, "an input of kind frames cannot be given in a file"},
		{"Phonemes", []byte{1}, `"Phonemes" is not a kind`},
		{"phonemes", []byte("h@'l@U"), "phonemes 6"},
		{"image", imageInput(0).Chunks[0].Image.Bytes, "image png 96×32"},
		{"image", []byte("GIF89a"), "the input file: "},
		{"tensor", []byte{1}, "an input of kind tensor cannot be given in a file"},
	} {
		in, err := NewInput(tc.kind, tc.data)
		var got string
		if err != nil {
			got = err.Error()
		} else {
			parts := make([]string, len(in.Chunks))
			for i, c := range in.Chunks {
				parts[i] = describeChunk(c)
			}
			got = strings.Join(parts, ", ")
			if in.Kind != tc.kind {
				t.Errorf("%s: kind %s", tc.kind, in.Kind)
			}
		}
		if !strings.Contains(got, tc.chunks) {
			t.Errorf("%s %q: %s; want %s", tc.kind, tc.data, got, tc.chunks)
		}
	}
}

// describeChunk is a chunk's kind and size: "audio 800", "audio 0 eos".
func describeChunk(c engine.Chunk) string {
	switch {
	case c.Text != nil:
		return fmt.Sprintf("text %d", len(c.Text.Text))
	case c.Audio != nil && c.Audio.EndOfSentence:
		return fmt.Sprintf("audio %d eos", len(c.Audio.Samples))
	case c.Audio != nil:
		return fmt.Sprintf("audio %d", len(c.Audio.Samples))
	case c.Data != nil:
		return fmt.Sprintf("%s %d", c.Data.Kind, len(c.Data.Bytes))
	case c.Image != nil:
		return fmt.Sprintf("image %s %d×%d", c.Image.Format, c.Image.Width, c.Image.Height)
	}
	return string(c.Kind())
}

func TestTypicalInputs(t *testing.T) {
	for _, kind := range []engine.Kind{engine.KindText, engine.KindAudio, engine.KindTimestamps, engine.KindImage} {
		in, why := typicalInput(kind)
		if in == nil || in.Kind != kind || len(in.Chunks) == 0 {
			t.Errorf("%s: %+v (%s)", kind, in, why)
			continue
		}
		for _, c := range append(in.Chunks, in.atLeast(20)...) {
			if c.Kind() != kind {
				t.Errorf("%s input with a %s chunk", kind, c.Kind())
			}
		}
		if n := len(in.atLeast(20)); n < 20 {
			t.Errorf("%s: atLeast(20) gave %d chunks", kind, n)
		}
		if wrong := wrongKind(kind); wrong.Kind() == kind {
			t.Errorf("%s: the wrong kind is %s", kind, wrong.Kind())
		}
	}
	a0, _ := toneInput(0).variant(0)
	a1, distinct := toneInput(0).variant(1)
	if !distinct || sameOutput(a0.Chunks, a1.Chunks) {
		t.Error("the tones of two jobs are the same")
	}
	i0, _ := imageInput(0).variant(0)
	i1, _ := imageInput(0).variant(1)
	if bytes.Equal(i0.Chunks[0].Image.Bytes, i1.Chunks[0].Image.Bytes) {
		t.Error("the images of two jobs are the same")
	}
	if err := i0.Chunks[0].Image.Check(); err != nil {
		t.Errorf("the typical image: %v", err)
	}
	for _, kind := range []engine.Kind{engine.KindFrames, engine.KindTensor, engine.KindRegions, "phonemes"} {
		if in, why := typicalInput(kind); in != nil || why == "" {
			t.Errorf("%s: %+v, %q; want no input and why", kind, in, why)
		}
	}
}

func TestEngineMessage(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{`external: program ["python3" "x.py"] of replica s/0 (pid 12): the program exited (exit status 1); its last output:
    Traceback
    boom: replica lost`, "the program exited (exit status 1)"},
		{`external: program ["python3" "x.py"]: not ready within 1s (warm_timeout)`, "not ready within 1s (warm_timeout)"},
		{`external: program ["x"] of replica s/0 (pid 1): stage protocol: header "hi" is not a JSON object: invalid character 'h' looking for beginning of value (signal: killed): replica lost`,
			`stage protocol: header "hi" is not a JSON object: invalid character 'h' looking for beginning of value (signal: killed) (nothing but messages may go to standard output: print to standard error)`},
	} {
		if got := engineMessage(errors.New(tc.err)); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}
