package flite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	oneSentence   = "The quick brown fox jumps over the lazy dog."
	fewSentences  = "Hello there, Mr. Smith. How are you today? I paid $5 on 3/4 for 12 apples!"
	paragraphText = "Speech synthesis turns written text into sound. " +
		"A talker predicts the acoustic frames of every sentence, and a vocoder turns those frames into a waveform. " +
		"So the first sentence plays sooner."
)

// newStage builds one replica through the registry, as the runtime does.
func newStage(tb testing.TB, name string, in, out engine.Kind, opts engine.Options) engine.Engine {
	tb.Helper()
	var r engine.Registry
	Register(&r)
	d, ok := r.Lookup(name)
	if !ok {
		tb.Fatalf("driver %s not registered", name)
	}
	spec := engine.Spec{Name: name, Input: in, Output: out, Options: opts}
	if err := d.Check(spec); err != nil {
		tb.Fatalf("Check: %v", err)
	}
	e, err := d.New(spec)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return e
}

func talkerFor(tb testing.TB, voice string) engine.Engine {
	v, err := lookupVoice(voice)
	if err != nil {
		tb.Fatal(err)
	}
	return newStage(tb, TalkerName, engine.KindText, v.kind, engine.Options{"voice": voice})
}

func vocoderFor(tb testing.TB, voice string) engine.Engine {
	v, err := lookupVoice(voice)
	if err != nil {
		tb.Fatal(err)
	}
	return newStage(tb, VocoderName, v.kind, engine.KindAudio, nil)
}

// run runs one request through e.
func run(e engine.Engine, params string, in ...engine.Chunk) ([]engine.Chunk, error) {
	sink := &engine.SliceSink{}
	job := &engine.Job{In: engine.NewSliceSource(in...), Out: sink}
	if params != "" {
		job.Params = json.RawMessage(params)
	}
	err := e.Process(context.Background(), job)
	return sink.Chunks, err
}

func text(s string) engine.Chunk { return engine.Chunk{Text: &engine.Text{Text: s}} }

// speak runs text through talker then vocoder and returns the talker's
// chunks and the audio chunks, which it checks with checkBlocks.
func speak(tb testing.TB, talker, vocoder engine.Engine, s, talkParams, vocParams string) ([]engine.Chunk, []engine.Chunk) {
	tb.Helper()
	mid, err := run(talker, talkParams, text(s))
	if err != nil {
		tb.Fatalf("talker: %v", err)
	}
	out, err := run(vocoder, vocParams, mid...)
	if err != nil {
		tb.Fatalf("vocoder: %v", err)
	}
	checkBlocks(tb, out)
	if len(out) < len(mid) {
		tb.Fatalf("vocoder sent %d chunks for %d inputs; every sentence makes audio", len(out), len(mid))
	}
	return mid, out
}

// checkBlocks checks what the vocoder promises of every chunk it sends:
// audio at 16 kHz, not empty, at most MaxBlockMs of samples, but for the
// end-of-sentence mark after each sentence, which holds none.
func checkBlocks(tb testing.TB, out []engine.Chunk) {
	tb.Helper()
	for i, c := range out {
		if c.Audio == nil {
			tb.Fatalf("chunk %d is %q, not audio", i, c.Kind())
		}
		if c.Audio.SampleRate != 16000 {
			tb.Fatalf("chunk %d: sample rate %d", i, c.Audio.SampleRate)
		}
		n := len(c.Audio.Samples)
		switch {
		case c.Audio.EndOfSentence && n != 0:
			tb.Fatalf("chunk %d marks a sentence's end but holds %d samples", i, n)
		case c.Audio.EndOfSentence && (i == 0 || out[i-1].Audio.EndOfSentence):
			tb.Fatalf("chunk %d marks the end of a sentence with no audio", i)
		case !c.Audio.EndOfSentence && (n == 0 || n > c.Audio.SampleRate*MaxBlockMs/1000):
			tb.Fatalf("chunk %d holds %d samples, want 1 to %d ms", i, n, MaxBlockMs)
		}
	}
	if len(out) > 0 && !out[len(out)-1].Audio.EndOfSentence {
		tb.Fatal("the last sentence has no end mark")
	}
}

// block is the size of every audio chunk of a sentence but its last, for
// every voice: 100 ms at 16 kHz (20 clustergen frames).
const block = 1600

// bySentence regroups audio chunks into sentences of lens samples each. It
// fails unless every sentence's audio comes in chunks of exactly block
// samples but the last, which holds 1 to block, no chunk holds the end of
// one sentence and the start of the next, and no chunk is left over.
func bySentence(tb testing.TB, out []engine.Chunk, lens []int) [][]int16 {
	tb.Helper()
	got := make([][]int16, len(lens))
	i := 0
	for si, n := range lens {
		if si > 0 {
			if i == len(out) || !out[i].Audio.EndOfSentence {
				tb.Fatalf("sentence %d does not end with its mark", si-1)
			}
			i++
		}
		for len(got[si]) < n {
			if i == len(out) {
				tb.Fatalf("sentence %d: the audio ends after %d of %d samples", si, len(got[si]), n)
			}
			b := out[i].Audio.Samples
			if rest := n - len(got[si]); len(b) != min(rest, block) {
				tb.Fatalf("sentence %d, chunk %d: %d samples, want %d (%d of the sentence's %d to go)", si, i, len(b), min(rest, block), rest, n)
			}
			got[si] = append(got[si], b...)
			i++
		}
	}
	if i < len(out) && out[i].Audio.EndOfSentence {
		i++
	}
	if i != len(out) {
		tb.Fatalf("%d audio chunks after the last sentence", len(out)-i)
	}
	return got
}

func concat(chunks []engine.Chunk) []int16 {
	var s []int16
	for _, c := range chunks {
		s = append(s, c.Audio.Samples...)
	}
	return s
}

func firstDiff(a, b []int16) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestTwoStageMatchesOneCall checks the split: talker then vocoder give the
// very samples of flite_text_to_wave with the same seed. For text of
// several sentences the reference is flite_text_to_wave on each sentence
// (as flite's own reader breaks them), concatenated: the talker makes one
// utterance per sentence so that audio can stream, which is also what
// flite does when it reads a file. One flite_text_to_wave call on the whole
// text is a single utterance with different pauses and phrasing, so it is
// not the reference.
func TestTwoStageMatchesOneCall(t *testing.T) {
	for _, voice := range Voices() {
		talker, vocoder := talkerFor(t, voice), vocoderFor(t, voice)
		v, _ := lookupVoice(voice)
		for _, tc := range []struct {
			name, text string
			seed       uint32
		}{
			{"single", oneSentence, DefaultSeed},
			{"single-seed-7", oneSentence, 7},
			{"multi", fewSentences, DefaultSeed},
		} {
			t.Run(voice+"/"+tc.name, func(t *testing.T) {
				mid, out := speak(t, talker, vocoder, tc.text, "", fmt.Sprintf(`{"seed": %d}`, tc.seed))
				clean, err := cleanText(tc.text)
				if err != nil {
					t.Fatal(err)
				}
				sentences := splitSentences(v, clean)
				if len(mid) != len(sentences) {
					t.Fatalf("talker sent %d chunks for %d sentences %q", len(mid), len(sentences), sentences)
				}
				refs := make([]*engine.Audio, len(sentences))
				lens := make([]int, len(sentences))
				for i, s := range sentences {
					refs[i] = referenceWave(v, s, tc.seed)
					lens[i] = len(refs[i].Samples)
				}
				var want []int16
				for i, got := range bySentence(t, out, lens) {
					ref := refs[i]
					if firstDiff(got, ref.Samples) >= 0 {
						t.Errorf("sentence %d %q: %d samples, reference %d, first difference at %d", i, sentences[i], len(got), len(ref.Samples), firstDiff(got, ref.Samples))
					}
					want = append(want, ref.Samples...)
				}
				if got := concat(out); firstDiff(got, want) >= 0 {
					t.Errorf("concatenated audio differs at %d (%d vs %d samples)", firstDiff(got, want), len(got), len(want))
				}
			})
		}
	}
}

// TestSeedChangesOnlyNoise checks that another seed changes clustergen
// samples but not their number, and leaves kal16 untouched.
func TestSeedChangesOnlyNoise(t *testing.T) {
	for _, voice := range Voices() {
		talker, vocoder := talkerFor(t, voice), vocoderFor(t, voice)
		_, a := speak(t, talker, vocoder, oneSentence, "", `{"seed": 1}`)
		_, b := speak(t, talker, vocoder, oneSentence, "", `{"seed": 2}`)
		x, y := concat(a), concat(b)
		if len(x) != len(y) {
			t.Errorf("%s: seed changed the length: %d vs %d", voice, len(x), len(y))
		}
		same := firstDiff(x, y) < 0
		if want := voice == "kal16"; same != want {
			t.Errorf("%s: same samples with another seed = %v, want %v", voice, same, want)
		}
	}
}

func TestSpeed(t *testing.T) {
	for _, voice := range []string{"slt", "kal16"} {
		talker, vocoder := talkerFor(t, voice), vocoderFor(t, voice)
		length := map[string]int{}
		for _, speed := range []string{"0.5", "1", "2"} {
			_, out := speak(t, talker, vocoder, oneSentence, `{"speed": `+speed+`}`, "")
			length[speed] = len(concat(out))
		}
		_, def := speak(t, talker, vocoder, oneSentence, "", "")
		if len(concat(def)) != length["1"] {
			t.Errorf("%s: speed 1 gives %d samples, default %d", voice, length["1"], len(concat(def)))
		}
		r := float64(length["0.5"]) / float64(length["2"])
		if r < 3 || r > 5 {
			t.Errorf("%s: duration ratio speed 0.5 / speed 2 = %.2f, want about 4 (%v)", voice, r, length)
		}
	}
}

func TestRequestVoice(t *testing.T) {
	talker, vocoder := talkerFor(t, "slt"), vocoderFor(t, "slt")
	mid, out := speak(t, talker, vocoder, oneSentence, `{"voice": "rms"}`, "")
	if mid[0].Frames.Voice != "rms" {
		t.Errorf("frames of voice %q, want rms", mid[0].Frames.Voice)
	}
	rms, _ := lookupVoice("rms")
	if d := firstDiff(concat(out), referenceWave(rms, oneSentence, DefaultSeed).Samples); d >= 0 {
		t.Errorf("rms request on an slt stage differs from rms at %d", d)
	}
}

func TestCheck(t *testing.T) {
	var r engine.Registry
	Register(&r)
	talker, _ := r.Lookup(TalkerName)
	vocoder, _ := r.Lookup(VocoderName)
	for _, tc := range []struct {
		name    string
		d       engine.Driver
		in, out engine.Kind
		opts    engine.Options
		err     string // "" for no error
	}{
		{"talker default", talker, engine.KindText, engine.KindFrames, nil, ""},
		{"talker kal16", talker, engine.KindText, engine.KindSegments, engine.Options{"voice": "kal16"}, ""},
		{"talker slt to segments", talker, engine.KindText, engine.KindSegments, engine.Options{"voice": "slt"},
			`flite-talker: voice "slt" outputs "frames", but the stage declares output "segments"`},
		{"talker kal16 to frames", talker, engine.KindText, engine.KindFrames, engine.Options{"voice": "kal16"},
			`flite-talker: voice "kal16" outputs "segments", but the stage declares output "frames"`},
		{"talker from audio", talker, engine.KindAudio, engine.KindFrames, nil,
			`flite-talker: voice "slt": talker input must be "text" (or "regions": the text read in an image), not "audio"`},
		{"talker unknown voice", talker, engine.KindText, engine.KindFrames, engine.Options{"voice": "hal"},
			`flite-talker: options: voice: unknown voice "hal"`},
		{"talker unknown option", talker, engine.KindText, engine.KindFrames, engine.Options{"pitch": 3},
			`flite-talker: options: json: unknown field "pitch"`},
		{"vocoder frames", vocoder, engine.KindFrames, engine.KindAudio, nil, ""},
		{"vocoder segments", vocoder, engine.KindSegments, engine.KindAudio, nil, ""},
		{"vocoder rms", vocoder, engine.KindFrames, engine.KindAudio, engine.Options{"voice": "rms"}, ""},
		{"vocoder kal16 from frames", vocoder, engine.KindFrames, engine.KindAudio, engine.Options{"voice": "kal16"},
			`flite-vocoder: voice "kal16" is vocoded from "segments", but the stage declares input "frames"`},
		{"vocoder from text", vocoder, engine.KindText, engine.KindAudio, nil,
			`flite-vocoder: vocoder input must be "frames" or "segments", not "text"`},
		{"vocoder to frames", vocoder, engine.KindFrames, engine.KindFrames, nil,
			`flite-vocoder: vocoder output must be "audio", not "frames"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Check(engine.Spec{Input: tc.in, Output: tc.out, Options: tc.opts})
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				e, err := tc.d.New(engine.Spec{Input: tc.in, Output: tc.out, Options: tc.opts})
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := e.Warm(context.Background()); err != nil {
					t.Fatalf("Warm: %v", err)
				}
				if err := e.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("Check error %v, want prefix %q", err, tc.err)
			}
			if _, err := tc.d.New(engine.Spec{Input: tc.in, Output: tc.out, Options: tc.opts}); err == nil {
				t.Fatal("New accepted what Check refused")
			}
		})
	}
}

// TestTalkerBadInput feeds the talker text and params it must refuse with a
// typed error, and odd text it must speak.
func TestTalkerBadInput(t *testing.T) {
	slt := talkerFor(t, "slt")
	kal := talkerFor(t, "kal16")
	long := strings.Repeat("word ", MaxTextRunes/5+1)
	for _, tc := range []struct {
		name   string
		e      engine.Engine
		params string
		in     []engine.Chunk
		input  string // *engine.InputError reason prefix
		param  string // *engine.ParamError message prefix
	}{
		{name: "empty", e: slt, in: []engine.Chunk{text("")}, input: "text is empty"},
		{name: "no chunks", e: slt, input: "text is empty"},
		{name: "whitespace", e: slt, in: []engine.Chunk{text(" \n\t  ")}, input: "text is empty"},
		{name: "punctuation only", e: slt, in: []engine.Chunk{text("... -- !?")}, input: "text has nothing to speak"},
		{name: "symbols only", e: kal, in: []engine.Chunk{text("日本語 🙂")}, input: "text has nothing to speak"},
		{name: "too long", e: slt, in: []engine.Chunk{text(long)}, input: fmt.Sprintf("text is %d characters long; the limit is %d", len(long), MaxTextRunes)},
		{name: "invalid utf-8", e: slt, in: []engine.Chunk{text("caf\xe9 au lait")}, input: "text is not valid UTF-8"},
		{name: "NUL", e: slt, in: []engine.Chunk{text("hello\x00world")}, input: "text contains a NUL character"},
		{name: "sentence too long", e: kal, params: `{"speed": 0.25}`, in: []engine.Chunk{text(strings.Repeat("7", 1200))},
			input: "speech of one sentence lasts"},
		{name: "wrong kind", e: slt, in: []engine.Chunk{{Audio: &engine.Audio{}}}, input: `talker input must be text or regions, got "audio"`},
		{name: "unknown voice", e: slt, params: `{"voice": "hal"}`, in: []engine.Chunk{text("hi")}, param: `invalid sampling params: voice: unknown voice "hal"`},
		{name: "voice of another kind", e: slt, params: `{"voice": "kal16"}`, in: []engine.Chunk{text("hi")}, param: `invalid sampling params: voice: voice "kal16" outputs segments but this stage outputs frames`},
		{name: "speed zero", e: slt, params: `{"speed": 0}`, in: []engine.Chunk{text("hi")}, param: "invalid sampling params: speed: 0 is outside [0.25, 4]"},
		{name: "speed too high", e: slt, params: `{"speed": 4.5}`, in: []engine.Chunk{text("hi")}, param: "invalid sampling params: speed: 4.5 is outside"},
		{name: "speed negative", e: kal, params: `{"speed": -1}`, in: []engine.Chunk{text("hi")}, param: "invalid sampling params: speed: -1 is outside"},
		{name: "speed string", e: slt, params: `{"speed": "fast"}`, in: []engine.Chunk{text("hi")}, param: "invalid sampling params: speed: want a number, got a JSON string"},
		{name: "unknown param", e: slt, params: `{"pitch": 2}`, in: []engine.Chunk{text("hi")}, param: "invalid sampling params: pitch: unknown field; this stage takes only voice and speed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.e, tc.params, tc.in...)
			if len(out) != 0 {
				t.Errorf("sent %d chunks before failing", len(out))
			}
			checkErr(t, err, tc.input, tc.param)
			if tc.param != "" {
				if err := tc.e.(engine.ParamsChecker).CheckParams(json.RawMessage(tc.params)); err == nil {
					t.Error("CheckParams accepted the params")
				}
			}
		})
	}
}

func checkErr(t *testing.T, err error, input, param string) {
	t.Helper()
	var ie *engine.InputError
	var pe *engine.ParamError
	switch {
	case err == nil:
		t.Fatal("no error")
	case input != "":
		if !errors.As(err, &ie) || !strings.HasPrefix(ie.Reason, input) {
			t.Fatalf("error %q (%T), want InputError %q", err, errors.Unwrap(err), input)
		}
	case param != "":
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Error(), param) {
			t.Fatalf("error %q (%T), want ParamError %q", err, errors.Unwrap(err), param)
		}
	}
}

// TestTalkerOddText speaks text that is odd but fine: it must come back as
// speech, never crash flite.
func TestTalkerOddText(t *testing.T) {
	var ascii strings.Builder
	for c := byte(0x20); c < 0x7f; c++ {
		ascii.WriteByte(c)
		ascii.WriteByte(' ')
	}
	for _, tc := range []struct{ name, text string }{
		{"accents", "The café in Zürich serves crème brûlée, naïve Ørsted!"},
		{"decomposed accent", "cafe\u0301 au lait"},
		{"control characters", "bell\x07 and\x1b escape\x7f delete\x0b and \x0cform feed"},
		{"every printable ascii", ascii.String()},
		{"typographic", "“Quotes” — dashes – and ellipses… it’s fine."},
		{"mixed scripts", "Hello 世界, привет мир, and goodbye."},
		{"long word", strings.Repeat("a", 2000)},
		{"long number", strings.Repeat("9", 300) + " dollars"},
		{"many tokens", strings.Repeat("la ", 600)},
		{"lines", "one\n\ntwo\r\n\r\nthree"},
		{"symbols", "@#%^&*()_+=[]{}|\\<>~` 100% 3.14 -5 1,000,000 1st 2nd $3.50 12:30pm 555-1234 e.g. etc."},
	} {
		for _, voice := range []string{"slt", "kal16"} {
			t.Run(voice+"/"+tc.name, func(t *testing.T) {
				talker, vocoder := talkerFor(t, voice), vocoderFor(t, voice)
				_, out := speak(t, talker, vocoder, tc.text, "", "")
				if len(concat(out)) == 0 {
					t.Fatal("no audio")
				}
			})
		}
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"café":             "cafe",
		"cafe\u0301":       "cafe",
		"Straße Ærø":       "Strasse AEro",
		"it’s “ok” — yes…": "it's \"ok\"  -  yes...",
		"a\x07b":           "a b",
		"x 世界 y":           "x    y",
		"line\nbreak\ttab": "line\nbreak\ttab",
		"before 😀.":        "before.",
		"wait , what ?!":   "wait, what?!",
		"3 . 14 and ...":   "3. 14 and...",
	} {
		got, err := cleanText(in)
		if err != nil || got != want {
			t.Errorf("cleanText(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// validFrames and validSegments are good talker output to break in tests.
func validFrames(t *testing.T) *engine.Frames {
	mid, err := run(talkerFor(t, "slt"), "", text("Hello there."))
	if err != nil || len(mid) != 1 {
		t.Fatalf("talker: %v, %d chunks", err, len(mid))
	}
	return mid[0].Frames
}

func validSegments(t *testing.T) *engine.Segments {
	mid, err := run(talkerFor(t, "kal16"), "", text("Hello there."))
	if err != nil || len(mid) != 1 {
		t.Fatalf("talker: %v, %d chunks", err, len(mid))
	}
	return mid[0].Segments
}

func TestVocoderBadInput(t *testing.T) {
	frames := newStage(t, VocoderName, engine.KindFrames, engine.KindAudio, nil)
	segments := newStage(t, VocoderName, engine.KindSegments, engine.KindAudio, nil)
	f0 := validFrames(t)
	s0 := validSegments(t)
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	fr := func(mod func(f *engine.Frames)) engine.Chunk {
		f := *f0
		f.Params = append([]float32(nil), f0.Params...)
		f.Str = append([]float32(nil), f0.Str...)
		mod(&f)
		return engine.Chunk{Frames: &f}
	}
	sg := func(mod func(s *engine.Segments)) engine.Chunk {
		s := *s0
		s.Names = append([]string(nil), s0.Names...)
		s.Ends = append([]float32(nil), s0.Ends...)
		s.Cluster = append([]bool(nil), s0.Cluster...)
		s.TargetPos = append([]float32(nil), s0.TargetPos...)
		s.TargetF0 = append([]float32(nil), s0.TargetF0...)
		mod(&s)
		return engine.Chunk{Segments: &s}
	}
	for _, tc := range []struct {
		name   string
		e      engine.Engine
		params string
		in     engine.Chunk
		input  string
		param  string
	}{
		{name: "segments into frames stage", e: frames, in: engine.Chunk{Segments: s0}, input: `vocoder input must be frames, got "segments"`},
		{name: "frames into segments stage", e: segments, in: engine.Chunk{Frames: f0}, input: `vocoder input must be segments, got "frames"`},
		{name: "text", e: frames, in: text("hi"), input: `vocoder input must be frames, got "text"`},
		{name: "empty chunk", e: frames, in: engine.Chunk{}, input: `vocoder input must be frames, got ""`},
		{name: "frames unknown voice", e: frames, in: fr(func(f *engine.Frames) { f.Voice = "hal" }), input: `frames: unknown voice "hal"`},
		{name: "frames of kal16", e: frames, in: fr(func(f *engine.Frames) { f.Voice = "kal16" }), input: `frames: voice "kal16" makes segments, not frames`},
		{name: "frames channels", e: frames, in: fr(func(f *engine.Frames) { f.Channels = 25; f.Params = f.Params[:25*10] }), input: `frames: voice "slt" has 26+5 channels per frame, got 25+5`},
		{name: "frames zero channels", e: frames, in: fr(func(f *engine.Frames) { f.Channels = 0 }), input: `frames: voice "slt" has 26+5 channels per frame, got 0+5`},
		{name: "frames str channels", e: frames, in: fr(func(f *engine.Frames) { f.StrChannels = 4 }), input: `frames: voice "slt" has 26+5 channels per frame, got 26+4`},
		{name: "frames shift", e: frames, in: fr(func(f *engine.Frames) { f.FrameShift = 0.01 }), input: `frames: voice "slt" has a frame shift of 0.005s, got 0.01s`},
		{name: "frames empty", e: frames, in: fr(func(f *engine.Frames) { f.Params = nil; f.Str = nil }), input: "frames: no frames"},
		{name: "frames ragged", e: frames, in: fr(func(f *engine.Frames) { f.Params = f.Params[:len(f.Params)-1] }), input: "frames: "},
		{name: "frames str short", e: frames, in: fr(func(f *engine.Frames) { f.Str = f.Str[:len(f.Str)-5] }), input: "frames: "},
		{name: "frames str long", e: frames, in: fr(func(f *engine.Frames) { f.Str = append(f.Str, 0, 0, 0, 0, 0) }), input: "frames: "},
		{name: "frames NaN", e: frames, in: fr(func(f *engine.Frames) { f.Params[30] = nan }), input: "frames: frame 1 channel 4: value NaN out of range"},
		{name: "frames Inf", e: frames, in: fr(func(f *engine.Frames) { f.Params[27] = inf }), input: "frames: frame 1 channel 1: value +Inf out of range"},
		{name: "frames negative F0", e: frames, in: fr(func(f *engine.Frames) { f.Params[26*5] = -100 }), input: "frames: frame 5 channel 0: value -100 out of range"},
		{name: "frames str NaN", e: frames, in: fr(func(f *engine.Frames) { f.Str[7] = nan }), input: "frames: frame 1 excitation 2: value NaN out of range"},
		{name: "frames too long", e: frames, in: fr(func(f *engine.Frames) {
			n := MaxChunkSeconds*200 + 1
			f.Params = make([]float32, n*26)
			f.Str = make([]float32, n*5)
		}), input: "frames: 180001 frames is more than 900 s"},
		{name: "segments unknown voice", e: segments, in: sg(func(s *engine.Segments) { s.Voice = "" }), input: `segments: unknown voice ""`},
		{name: "segments of slt", e: segments, in: sg(func(s *engine.Segments) { s.Voice = "slt" }), input: `segments: voice "slt" makes frames, not segments`},
		{name: "segments one", e: segments, in: sg(func(s *engine.Segments) { s.Names, s.Ends, s.Cluster = s.Names[:1], s.Ends[:1], s.Cluster[:1] }), input: "segments: need at least 2 segments, got 1"},
		{name: "segments ends short", e: segments, in: sg(func(s *engine.Segments) { s.Ends = s.Ends[1:] }), input: "segments: "},
		{name: "segments cluster short", e: segments, in: sg(func(s *engine.Segments) { s.Cluster = nil }), input: "segments: "},
		{name: "segments bad phone", e: segments, in: sg(func(s *engine.Segments) { s.Names[2] = "xx" }), input: `segments: segment 2: "xx" is not a phone of voice "kal16"`},
		{name: "segments long phone", e: segments, in: sg(func(s *engine.Segments) { s.Names[1] = strings.Repeat("a", 100) }), input: "segments: segment 1: "},
		{name: "segments decreasing", e: segments, in: sg(func(s *engine.Segments) { s.Ends[3] = s.Ends[2] - 0.01 }), input: "segments: segment end 3: "},
		{name: "segments NaN end", e: segments, in: sg(func(s *engine.Segments) { s.Ends[0] = nan }), input: "segments: segment end 0: NaN"},
		{name: "segments negative end", e: segments, in: sg(func(s *engine.Segments) { s.Ends[0] = -1 }), input: "segments: segment end 0: -1"},
		{name: "segments too long", e: segments, in: sg(func(s *engine.Segments) { s.Ends[len(s.Ends)-1] = 1e6 }), input: "segments: segment end"},
		{name: "segments no targets", e: segments, in: sg(func(s *engine.Segments) { s.TargetPos, s.TargetF0 = nil, nil }), input: "segments: need as many target positions"},
		{name: "segments targets mismatch", e: segments, in: sg(func(s *engine.Segments) { s.TargetF0 = s.TargetF0[1:] }), input: "segments: need as many target positions"},
		{name: "segments targets at 0", e: segments, in: sg(func(s *engine.Segments) { s.TargetPos, s.TargetF0 = []float32{0}, []float32{100} }), input: "segments: the last target position must be after 0"},
		{name: "segments target decreasing", e: segments, in: sg(func(s *engine.Segments) { s.TargetPos[2] = s.TargetPos[1] - 0.01 }), input: "segments: target position 2: "},
		{name: "segments target Inf", e: segments, in: sg(func(s *engine.Segments) { s.TargetPos[1] = inf }), input: "segments: target position 1: +Inf"},
		{name: "segments zero F0", e: segments, in: sg(func(s *engine.Segments) { s.TargetF0[1] = 0 }), input: "segments: target 1: F0 0 is outside [20, 1000] Hz"},
		{name: "segments NaN F0", e: segments, in: sg(func(s *engine.Segments) { s.TargetF0[1] = nan }), input: "segments: target 1: F0 NaN is outside"},
		{name: "segments too many", e: segments, in: sg(func(s *engine.Segments) {
			s.TargetPos = make([]float32, MaxSegments+1)
			s.TargetF0 = make([]float32, MaxSegments+1)
		}), input: "segments: more than 50000 segments or targets"},
		{name: "seed negative", e: frames, params: `{"seed": -1}`, in: engine.Chunk{Frames: f0}, param: "invalid sampling params: seed: -1 is out of range 0..4294967295"},
		{name: "seed too big", e: segments, params: `{"seed": 4294967296}`, in: engine.Chunk{Segments: s0}, param: "invalid sampling params: seed: 4294967296 is out of range"},
		{name: "seed float", e: frames, params: `{"seed": 1.5}`, in: engine.Chunk{Frames: f0}, param: "invalid sampling params: seed: want an integer, got a JSON number 1.5"},
		{name: "unknown param", e: frames, params: `{"voice": "slt"}`, in: engine.Chunk{Frames: f0}, param: "invalid sampling params: voice: unknown field; this stage takes only seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.e, tc.params, tc.in)
			if len(out) != 0 {
				t.Errorf("sent %d chunks before failing", len(out))
			}
			checkErr(t, err, tc.input, tc.param)
		})
	}
	// Odd but valid: repeated target positions and pitch at the edges of
	// the accepted range still vocode.
	s := sg(func(s *engine.Segments) {
		s.TargetPos[2] = s.TargetPos[1]
		s.TargetF0[0], s.TargetF0[1] = minTargetF0, maxTargetF0
	})
	if _, err := run(segments, "", s); err != nil {
		t.Errorf("edge segments: %v", err)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	talker := talkerFor(t, "slt")
	err := talker.Process(ctx, &engine.Job{In: engine.NewSliceSource(text(fewSentences)), Out: &engine.SliceSink{}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("talker: %v, want context.Canceled", err)
	}
	vocoder := vocoderFor(t, "slt")
	err = vocoder.Process(ctx, &engine.Job{In: engine.NewSliceSource(engine.Chunk{Frames: validFrames(t)}), Out: &engine.SliceSink{}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("vocoder: %v, want context.Canceled", err)
	}
}

func TestAnalyze(t *testing.T) {
	words, err := Analyze("Dr. Smith paid $5 on 3/4.", "slt")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range words {
		names = append(names, w.Word)
		if len(w.Phones) == 0 {
			t.Errorf("%q has no phones", w.Word)
		}
		for _, p := range w.Phones {
			if p == "pau" || p != strings.ToLower(p) {
				t.Errorf("%q has phone %q", w.Word, p)
			}
		}
	}
	got := strings.Join(names, " ")
	// flite reads 3/4 as "three fourth 's" (its plural suffix is a word).
	for _, want := range []string{"doctor", "smith", "paid", "five", "dollars", "on", "three"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("Analyze words %q lack %q", got, want)
		}
	}
	if words[0].Word != "doctor" || strings.Join(words[0].Phones, " ") != "d aa k t er" {
		t.Errorf("first word %+v, want doctor [d aa k t er]", words[0])
	}

	hello, err := Analyze("Hello, world.", "kal16")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(hello) != "[{hello [hh ax l ow] 0 0 5 0} {world [w er l d] 1 7 12 0}]" {
		t.Errorf("Analyze(Hello, world.) = %v", hello)
	}

	for _, tc := range []struct{ text, voice, input string }{
		{"", "slt", "text is empty"},
		{"?!", "slt", "text has nothing to speak"},
		{"hello", "hal", `unknown voice "hal"`},
	} {
		_, err := Analyze(tc.text, tc.voice)
		checkErr(t, err, tc.input, "")
	}
}

// TestAnalyzeMatchesTalker checks that Analyze's phones are the segments
// the talker sends (kal16 shows them).
func TestAnalyzeMatchesTalker(t *testing.T) {
	words, err := Analyze(fewSentences, "kal16")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, w := range words {
		want = append(want, w.Phones...)
	}
	mid, err := run(talkerFor(t, "kal16"), "", text(fewSentences))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range mid {
		for _, n := range c.Segments.Names {
			if n != "pau" {
				got = append(got, n)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("talker phones\n%v\nAnalyze phones\n%v", got, want)
	}
}

func TestSynthesizeTimed(t *testing.T) {
	for _, voice := range Voices() {
		a, words, err := SynthesizeTimed(fewSentences, voice, 3)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := lookupVoice(voice)
		clean, _ := cleanText(fewSentences)
		ref := referenceWave(v, clean, 3)
		if d := firstDiff(a.Samples, ref.Samples); d >= 0 || a.SampleRate != 16000 {
			t.Errorf("%s: audio differs from flite_text_to_wave at %d (rate %d)", voice, d, a.SampleRate)
		}
		analyzed, err := Analyze(fewSentences, voice)
		if err != nil {
			t.Fatal(err)
		}
		if len(words) != len(analyzed) {
			t.Errorf("%s: %d timed words, %d analyzed", voice, len(words), len(analyzed))
		}
		durMs := len(a.Samples) * 1000 / a.SampleRate
		prev := 0
		for i, w := range words {
			if i < len(analyzed) && w.Word != analyzed[i].Word {
				t.Errorf("%s: word %d %q, analyzed %q", voice, i, w.Word, analyzed[i].Word)
			}
			if w.StartMs < prev || w.EndMs <= w.StartMs || w.EndMs > durMs {
				t.Errorf("%s: word %d %+v after %d ms (audio %d ms)", voice, i, w, prev, durMs)
			}
			prev = w.EndMs
		}
		if words[0].Word != "hello" || words[0].StartMs < 100 || words[0].StartMs > 300 {
			t.Errorf("%s: first word %+v", voice, words[0])
		}
	}
	if _, _, err := SynthesizeTimed("hi", "slt", -1); err == nil {
		t.Error("negative seed accepted")
	}
	_, _, err := SynthesizeTimed("\x00", "slt", 1)
	checkErr(t, err, "text contains a NUL character", "")
}

func TestVoices(t *testing.T) {
	if got := fmt.Sprint(Voices()); got != "[slt rms awb kal16]" {
		t.Errorf("Voices() = %s", got)
	}
	f := validFrames(t)
	if f.Channels != 26 || f.StrChannels != 5 || f.FrameShift != 0.005 || f.Voice != "slt" {
		t.Errorf("frames layout %d+%d every %gs for %s", f.Channels, f.StrChannels, f.FrameShift, f.Voice)
	}
}

func TestBreakLongTokens(t *testing.T) {
	long := strings.Repeat("a", 2*maxTokenBytes+5)
	in := "x " + long + " y"
	got, err := cleanTextMap(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "x " + long[:maxTokenBytes] + " " + long[maxTokenBytes:2*maxTokenBytes] + " " + long[2*maxTokenBytes:] + " y"
	if got.text != want {
		t.Errorf("breakLongTokens = %q", got.text)
	}
	// The pieces map back to the long word, end to end.
	i := strings.Index(got.text, long[:maxTokenBytes])
	if s, e := got.span(i, i+maxTokenBytes); s != 2 || e != 2+maxTokenBytes {
		t.Errorf("first piece spans %d..%d of the input, want 2..%d", s, e, 2+maxTokenBytes)
	}
	if s := "short words stay"; breakLongTokens(cleaned{text: s}).text != s {
		t.Errorf("breakLongTokens(%q) changed it", s)
	}
}

// TestCleanTextOrigin checks that every byte of the cleaned text maps back
// to the input character it came from.
func TestCleanTextOrigin(t *testing.T) {
	for _, tc := range []struct {
		in       string
		from, to int    // a span of the cleaned text
		want     string // the input it came from
	}{
		{"Café ß 5€!", 0, 4, "Café"},
		{"Café ß 5€!", 5, 7, "ß"},
		{"a 😀 b .", 0, 1, "a"},
		{"x — y", 2, 3, "—"},
		{"ño ok", 0, 2, "ño"},
	} {
		c, err := cleanTextMap(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.origin) != len(c.text)+1 {
			t.Fatalf("%q: %d origins for %d bytes", tc.in, len(c.origin), len(c.text))
		}
		s, e := c.span(tc.from, tc.to)
		if got := string([]rune(tc.in)[s:e]); got != tc.want {
			t.Errorf("%q cleaned to %q: bytes %d..%d came from %q, want %q", tc.in, c.text, tc.from, tc.to, got, tc.want)
		}
	}
}

func TestSplitSentences(t *testing.T) {
	if err := initFlite(); err != nil {
		t.Fatal(err)
	}
	v, _ := lookupVoice("slt")
	long := strings.Repeat("word ", 300)
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello", []string{"Hello"}},
		{"  Hello there.  ", []string{"Hello there."}},
		{"It is here. Done!", []string{"It is here.", "Done!"}},
		{"Hello there, Mr. Smith. How are you? Fine: thanks!", []string{"Hello there, Mr. Smith.", "How are you?", "Fine:", "thanks!"}},
		{"Dr. Who met St. John. Then they left.", []string{"Dr. Who met St. John.", "Then they left."}},
		{"one line\nnext line\n\nnew paragraph", []string{"one line\nnext line", "new paragraph"}},
		{"\"Quoted,\" she said. (Then left.)", []string{"\"Quoted,\" she said.", "(Then left.)"}},
		{long, []string{strings.TrimSpace(long[:maxSentenceBytes]), strings.TrimSpace(long[maxSentenceBytes:])}},
	} {
		got := splitSentences(v, tc.in)
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("splitSentences(%.40q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// FuzzTalker feeds the talker arbitrary text: it must speak it or refuse it
// with an *engine.InputError, never reach one of flite's exit paths. Plain
// go test runs the seeds; go test -fuzz FuzzTalker explores.
func FuzzTalker(f *testing.F) {
	for _, s := range []string{
		"$5 on 3/4", "12/31/2020 at 10:30am", "(555) 123-4567", "http://x.com/a?b=c", "a@b.com",
		"U.S.A. e.g. vs. No. 1990s '90s", "C++ C# x86_64 __init__", "1,000,000.5 -0.5 +5 5+ 5%%",
		"..5 5.. --5 $$5 1.2.3.4 1:2:3", "''' ~ ^ ` | \\ {} [] <> = * # %", "XIV Dr. St. Mr",
		"1-800-FLOWERS ZZZZZZZZ qqqq bcdfg", "\n\n\t", "é ß ’ — 世界",
	} {
		f.Add(s, uint8(0))
	}
	engines := map[engine.Kind][2]engine.Engine{}
	for _, voice := range []string{"slt", "kal16"} {
		v, _ := lookupVoice(voice)
		engines[v.kind] = [2]engine.Engine{talkerFor(f, voice), vocoderFor(f, voice)}
	}
	f.Fuzz(func(t *testing.T, s string, which uint8) {
		voice := Voices()[int(which)%len(Voices())]
		v, _ := lookupVoice(voice)
		e := engines[v.kind]
		mid, err := run(e[0], `{"voice": "`+voice+`"}`, text(s))
		if err != nil {
			var ie *engine.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("talker: %v", err)
			}
			return
		}
		if _, err := run(e[1], "", mid...); err != nil {
			t.Fatalf("vocoder: %v", err)
		}
	})
}

// TestAnalyzeSpans checks that every spoken word comes from a token of the
// input whose span is in order, inside the input, not overlapping the
// others, and is the input's own text there.
func TestAnalyzeSpans(t *testing.T) {
	for _, text := range []string{
		"Dr. Smith paid $100 on 3/14/2024 at https://example.com/a?b=1.",
		"It's 9:30 a.m. — café, naïve, Zürich… 😀 then 1st, 2nd & 3rd!",
		"The U.S.A. has 50 states; e.g. Ohio (OH) and Texas.",
		"Emoji only between 👋🏽 words, and CJK 漢字 too.",
		strings.Repeat("x", 250) + " tail",
	} {
		words, err := Analyze(text, "slt")
		if err != nil {
			t.Fatal(err)
		}
		runes := []rune(text)
		prevEnd, prevToken := 0, -1
		for i, w := range words {
			if w.Token == prevToken {
				if w.CharStart != words[i-1].CharStart || w.CharEnd != words[i-1].CharEnd {
					t.Errorf("%q: words of token %d have different spans", text, w.Token)
				}
				continue
			}
			if w.Token != prevToken+1 {
				t.Errorf("%q: token %d follows %d", text, w.Token, prevToken)
			}
			prevToken = w.Token
			if w.CharStart < prevEnd || w.CharEnd <= w.CharStart || w.CharEnd > len(runes) {
				t.Errorf("%q: %q spans %d..%d after %d, in %d characters", text, w.Word, w.CharStart, w.CharEnd, prevEnd, len(runes))
				continue
			}
			prevEnd = w.CharEnd
			span := string(runes[w.CharStart:w.CharEnd])
			if strings.TrimSpace(span) != span || span == "" {
				t.Errorf("%q: token %d spans %q", text, w.Token, span)
			}
		}
	}
}

// TestVoiceInfo checks that the voices described are the voices built in.
func TestVoiceInfo(t *testing.T) {
	var ids []string
	for _, v := range VoiceInfo {
		ids = append(ids, v.ID)
	}
	if !slices.Equal(ids, Voices()) {
		t.Errorf("described voices %v, built in %v", ids, Voices())
	}
}
