package acceptance

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// paragraph is text a user might give `omnistage say`.
type paragraph struct {
	name string
	text string
	// stdin passes the text on standard input, with TEXT '-'.
	stdin bool
	// flite is what the flite command gets instead of text when text is
	// not ASCII: it reads bytes, not UTF-8, so it is given the ASCII that
	// omnistage itself reduces the text to.
	flite string
}

var paragraphs = []paragraph{
	{name: "numbers", text: "On March 3rd, 2024, the shop sold 1,250 tickets at $12.50 each. " +
		"By 5:30 p.m. on Friday, 42% of them had been used."},
	{name: "abbreviations", text: "Dr. Smith lives at 221 Baker St., near the corner of Main St. and Oak Ave. " +
		"Mr. and Mrs. Jones moved in next door on Jan. 5th, with two cats, a dog, etc."},
	{name: "punctuation", text: `"Well," she said, "I suppose we could try again..." Then - after a long pause - ` +
		`she added (very quietly): 'Maybe tomorrow?' He didn't answer; he just smiled!`},
	// Non-ASCII: accents and typographic punctuation are transliterated;
	// the emoji and the CJK are not English and are dropped, like any
	// character the talker cannot read (TestUnspeakable). The talker also
	// closes the gap a dropped character leaves before punctuation
	// ("before 😀." reads "before."), so the period still ends a sentence.
	{name: "non-ascii", text: "“We met at the café,” said the naïve reporter — she’d never been to Zürich before 😀. " +
		"Her notes read 東京 and nothing else… it was a long day.",
		flite: `"We met at the cafe," said the naive reporter - she'd never been to Zurich before. ` +
			"Her notes read and nothing else... it was a long day."},
	{name: "prose", text: "Please call Stella. Ask her to bring these things with her from the store: " +
		"six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob. " +
		"We also need a small plastic snake and a big toy frog for the kids."},
	{name: "one-word", text: "Hello"},
	{name: "stdin", stdin: true, text: "The weather today is mild.\nTomorrow it will rain in the north,\n" +
		"and the wind will turn to the west.\n"},
}

// Intelligibility bounds, calibrated on the paragraphs above in all four
// voices and on the negative controls of TestNegativeControls. Measured
// word error rates: 0 to 0.23 per paragraph, 0.08 to 0.14 per voice over
// all paragraphs; the controls 0.61 (the first half of the speech) and
// 0.98 to 1.04 (the rest). See TestWER for how words are compared.
const (
	// maxWER bounds one paragraph's word error rate. A paragraph of 20 to
	// 50 words may lose a few words to the recognizer's language model
	// (names, "oak ave", "the shop sold"); losing half its speech may not.
	maxWER = 0.40
	// maxVoiceWER bounds a voice's word error rate over all the
	// paragraphs it spoke: errors over words, so long paragraphs weigh
	// more.
	maxVoiceWER = 0.25
)

// Duration bounds against the flite command. `flite -t TEXT` speaks the
// whole text as one utterance, where omnistage speaks one utterance per
// sentence to stream them: the same words with the same durations, but
// each utterance has its own leading and trailing pause where the single
// utterance has a shorter phrase break between sentences. Text of one
// sentence gives the same number of samples, so the allowance is per
// sentence boundary. Measured over the paragraphs in four voices: -0.04 to
// +0.70 s per boundary (rms is the slowest voice and pauses longest).
// The lower bound is the tighter one because dropping speech makes the
// audio shorter.
//
// `flite -f FILE` reads the text a sentence at a time, by the very rule
// omnistage splits with, and gives the same number of samples (measured:
// every paragraph, every voice), so against it the bound is rounding.
const (
	// minBoundaryS and maxBoundaryS bound the difference from flite -t
	// per sentence boundary.
	minBoundaryS = -0.15
	maxBoundaryS = 1.0
	// sameDurationS bounds the difference from flite -t for one sentence,
	// and from flite -f for any text.
	sameDurationS = 0.01
)

// stats accumulates word errors over paragraphs.
type stats struct {
	mu          sync.Mutex
	errs, words int
	worst       float64
	worstName   string
}

func (s *stats) add(name string, errs, words int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs += errs
	s.words += words
	if w := float64(errs) / float64(words); w >= s.worst {
		s.worst, s.worstName = w, name
	}
}

// TestSay runs `omnistage say --timestamps` on every paragraph in every
// voice (slt only, and two paragraphs in the other voices, with -short)
// and checks what a user would: that a listener understands the speech,
// that it lasts as long as flite's own, and that the timestamps fit it.
func TestSay(t *testing.T) {
	for _, voice := range []string{"slt", "rms", "awb", "kal16"} {
		t.Run(voice, func(t *testing.T) {
			t.Parallel()
			ps := paragraphs
			if testing.Short() && voice != "slt" {
				ps = []paragraph{paragraphs[0], paragraphs[4]}
			}
			var st stats
			t.Run("paragraphs", func(t *testing.T) {
				for _, p := range ps {
					t.Run(p.name, func(t *testing.T) {
						t.Parallel()
						errs, words := checkSay(t, voice, p)
						st.add(p.name, errs, words)
					})
				}
			})
			if st.words == 0 {
				return
			}
			rate := float64(st.errs) / float64(st.words)
			t.Logf("%s: word error rate %.3f over %d words (worst %.3f, %s)", voice, rate, st.words, st.worst, st.worstName)
			if rate > maxVoiceWER {
				t.Errorf("%s: word error rate %.3f over all paragraphs exceeds %.2f", voice, rate, maxVoiceWER)
			}
		})
	}
}

// sayArgs returns the command-line arguments that speak p in voice.
func sayArgs(t *testing.T, voice string, p paragraph, extra ...string) (args []string, stdin string) {
	args = append([]string{"--voice", voice}, extra...)
	if voice == "kal16" {
		args = append(args, "--config", kal16Config(t))
	}
	if p.stdin {
		return append(args, "-"), p.text
	}
	return append(args, p.text), ""
}

// checkSay speaks p in voice with timestamps and checks the result; it
// returns the word errors and the reference's words.
func checkSay(t *testing.T, voice string, p paragraph) (errs, words int) {
	args, stdin := sayArgs(t, voice, p, "--timestamps")
	r := say(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r.audio.SampleRate != 16000 {
		t.Errorf("sample rate %d, want 16000", r.audio.SampleRate)
	}
	prons := spoken(t, p.text, voice)

	checkTimestamps(t, r.words, names(prons), r.seconds())

	ref := said(prons)
	hyp := recognize(t, r.audio)
	l := sharedLexicon(t)
	errs = l.wordErrors(ref, hypWords(hyp))
	wer := float64(errs) / float64(len(ref))
	t.Logf("word error rate %.3f (%d of %d)\n  said:  %s\n  heard: %s", wer, errs, len(ref), strings.Join(ref, " "), hyp)
	if wer > maxWER {
		t.Errorf("word error rate %.3f exceeds %.2f", wer, maxWER)
	}

	ft := p.text
	if p.flite != "" {
		ft = p.flite
	}
	n := sentences(t, voice, p.text)
	oneUtt, perSentence := seconds(fliteCLI(t, voice, ft, false)), seconds(fliteCLI(t, voice, ft, true))
	diff := r.seconds() - oneUtt
	t.Logf("duration %.3f s; flite -t %.3f s (%+.3f s over %d sentences); flite -f %.3f s",
		r.seconds(), oneUtt, diff, n, perSentence)
	lo, hi := minBoundaryS*float64(n-1)-sameDurationS, maxBoundaryS*float64(n-1)+sameDurationS
	if diff < lo || diff > hi {
		t.Errorf("duration %.3f s differs from flite -t's %.3f s by %+.3f s; %d sentences allow [%+.2f, %+.2f] s",
			r.seconds(), oneUtt, diff, n, lo, hi)
	}
	if d := r.seconds() - perSentence; math.Abs(d) > sameDurationS {
		t.Errorf("duration %.3f s differs from flite -f's %.3f s by %+.3f s", r.seconds(), perSentence, d)
	}
	return errs, len(ref)
}

// checkTimestamps checks --timestamps output against the words flite
// speaks: one entry per input token, their spoken words in order the words
// spoken, monotonic, not overlapping, within the audio.
func checkTimestamps(t *testing.T, got []engine.Word, words []string, seconds float64) {
	t.Helper()
	var spoken []string
	for _, w := range got {
		spoken = append(spoken, w.Spoken...)
	}
	if !slices.Equal(spoken, words) {
		t.Errorf("timestamps speak %q, flite %q", spoken, words)
	}
	durMs := int(math.Round(seconds * 1000))
	prevEnd := 0
	for i, w := range got {
		if w.StartMs < prevEnd || w.EndMs < w.StartMs || w.EndMs > durMs {
			t.Errorf("timestamp %d %+v is out of order or outside [0, %d] ms (previous end %d)", i, w, durMs, prevEnd)
		}
		prevEnd = w.EndMs
	}
}

// TestSpeed checks that --speed 2 speaks in about half the time.
//
// The recognizer does not judge speech at other rates: on this paragraph
// its word error rate is 0.08 at speed 1, 0.18 at 1.25, 0.29 at 1.5, 0.82
// at 2 and 0.51 at 0.5. Its models were trained on speech at a normal
// pace, and each phone model needs at least three 10 ms frames, more than
// many phones last at speed 2.
func TestSpeed(t *testing.T) {
	p := paragraphs[4]
	normal := say(t, "", p.text)
	fast := say(t, "", "--speed", "2", p.text)
	if normal.code != 0 || fast.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", normal.code, fast.code, normal.stderr, fast.stderr)
	}
	ratio := fast.seconds() / normal.seconds()
	t.Logf("speed 2: %.3f s against %.3f s (ratio %.3f)", fast.seconds(), normal.seconds(), ratio)
	// Speed scales every segment's duration, pauses included; the
	// measured ratio is 0.504.
	if ratio < 0.45 || ratio > 0.55 {
		t.Errorf("--speed 2 made the audio %.3f times as long, want about 0.5", ratio)
	}
}

// Test24k checks the built-in 24 kHz pipeline: same speech, resampled.
func Test24k(t *testing.T) {
	p := paragraphs[4]
	base := say(t, "", p.text)
	hi := say(t, "", "--config", "builtin:tts-24k", "--timestamps", p.text)
	if base.code != 0 || hi.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", base.code, hi.code, base.stderr, hi.stderr)
	}
	if hi.audio.SampleRate != 24000 {
		t.Fatalf("sample rate %d, want 24000", hi.audio.SampleRate)
	}
	// The resampler keeps timing exactly: 3 samples out per 2 in.
	if want := len(base.audio.Samples) * 3 / 2; abs(len(hi.audio.Samples)-want) > 1 {
		t.Errorf("%d samples at 24 kHz, want %d (1.5 times %d at 16 kHz)", len(hi.audio.Samples), want, len(base.audio.Samples))
	}
	words := spoken(t, p.text, "slt")
	checkTimestamps(t, hi.words, names(words), hi.seconds())
	wer := sharedLexicon(t).wer(said(words), hypWords(recognize(t, hi.audio)))
	t.Logf("24 kHz: %.3f s, word error rate %.3f", hi.seconds(), wer)
	if wer > maxWER {
		t.Errorf("word error rate %.3f exceeds %.2f", wer, maxWER)
	}
}

func abs(x int) int { return max(x, -x) }

// TestNegativeControls proves the intelligibility check can fail: audio
// that is not the paragraph's speech, or only part of it, exceeds maxWER.
func TestNegativeControls(t *testing.T) {
	p, other := paragraphs[4], paragraphs[0]
	r := say(t, "", p.text)
	o := say(t, "", other.text)
	if r.code != 0 || o.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", r.code, o.code, r.stderr, o.stderr)
	}
	speech := r.audio.Samples
	rng := rand.New(rand.NewPCG(1, 2))
	controls := []struct {
		name    string
		samples []int16
	}{
		{"silence", make([]int16, len(speech))},
		{"white noise", noise(rng, len(speech), rms(speech))},
		{"reversed", reversed(speech)},
		{"scrambled 250 ms blocks", scrambled(rng, speech, 16000/4)},
		{"first half", speech[:len(speech)/2]},
		{"another paragraph", o.audio.Samples},
	}
	l := sharedLexicon(t)
	ref := said(spoken(t, p.text, "slt"))
	wer := l.wer(ref, hypWords(recognize(t, r.audio)))
	t.Logf("the paragraph's own audio: word error rate %.3f", wer)
	for _, c := range controls {
		t.Run(c.name, func(t *testing.T) {
			hyp := recognize(t, &engine.Audio{SampleRate: r.audio.SampleRate, Samples: c.samples})
			got := l.wer(ref, hypWords(hyp))
			t.Logf("word error rate %.3f; heard: %s", got, hyp)
			if got <= maxWER {
				t.Errorf("word error rate %.3f is within the bound %.2f: the check cannot tell this from speech", got, maxWER)
			}
		})
	}
}

func rms(s []int16) float64 {
	var sum float64
	for _, x := range s {
		sum += float64(x) * float64(x)
	}
	return math.Sqrt(sum / float64(len(s)))
}

func noise(rng *rand.Rand, n int, level float64) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(max(-32768, min(32767, rng.NormFloat64()*level)))
	}
	return out
}

func reversed(s []int16) []int16 {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// scrambled cuts s into blocks of n samples and shuffles them.
func scrambled(rng *rand.Rand, s []int16, n int) []int16 {
	var blocks [][]int16
	for i := 0; i < len(s); i += n {
		blocks = append(blocks, s[i:min(i+n, len(s))])
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	return slices.Concat(blocks...)
}

// TestUnspeakable checks what happens to characters the English talker
// cannot read. Mixed into English they are dropped: the audio is exactly
// that of the English alone. Text of nothing else is refused with a usage
// error (exit 2) that says why, and no audio.
func TestUnspeakable(t *testing.T) {
	mixed := say(t, "", "Hello 東京 world 😀")
	plain := say(t, "", "Hello world")
	if mixed.code != 0 || plain.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", mixed.code, plain.code, mixed.stderr, plain.stderr)
	}
	if !slices.Equal(mixed.audio.Samples, plain.audio.Samples) {
		t.Errorf("dropping CJK and emoji changed the audio: %d samples, %d without them", len(mixed.audio.Samples), len(plain.audio.Samples))
	}
	for _, text := range []string{"東京へようこそ", "😀 🎉", "— … “”"} {
		r := say(t, "", text)
		if r.code != 2 || r.audio != nil || !strings.Contains(r.stderr, "nothing to speak") {
			t.Errorf("say %q: exit %d, audio %v, stderr %q; want exit 2, no audio and \"nothing to speak\"", text, r.code, r.audio != nil, r.stderr)
		}
	}
}

// TestTimestampsLeaveAudio checks that asking for timestamps does not
// change the audio.
func TestTimestampsLeaveAudio(t *testing.T) {
	p := paragraphs[0]
	with := say(t, "", "--timestamps", p.text)
	without := say(t, "", p.text)
	if with.code != 0 || without.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", with.code, without.code, with.stderr, without.stderr)
	}
	if !slices.Equal(with.audio.Samples, without.audio.Samples) {
		t.Errorf("--timestamps changed the audio: %d samples, %d without", len(with.audio.Samples), len(without.audio.Samples))
	}
}
