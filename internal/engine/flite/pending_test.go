package flite

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// pendingTexts are texts whose sentence breaks a streamed request could
// get wrong: abbreviations, numbers with points, quotes, breaks by
// newlines and by ?!:, a sentence past the byte bound, a word with a
// diacritic, punctuation standing alone.
var pendingTexts = []string{
	"Hello there. How are you? I am fine!",
	"Mr. Smith paid $3.50 at 9 a.m. on Jan. 5th. Then he left.",
	"\"Quoted,\" she said. 'Single' too.\n\nA new paragraph: with a colon.",
	"Caf\u00e9 au lait, s'il vous pla\u00eet. -- Next one .",
	"One line\nanother line\n\nand a paragraph break. The end",
	"Hello. \"Well,\" he said. (Yes.) [No.] {Maybe.} \u00bfQu\u00e9? \u00a1S\u00ed! 1. 2. 3. e.g. this, U.S.A. Today... ok?! 'Tis.",
	strings.Repeat("a long run of words without a stop ", 40) + "and its end. Short one.",
}

// cut returns the sentences a pending text gives when it arrives in
// pieces.
func cut(t *testing.T, voiceName string, pieces []string) []sentence {
	t.Helper()
	v, err := lookupVoice(voiceName)
	if err != nil {
		t.Fatal(err)
	}
	p := pending{voice: v}
	var got []sentence
	for _, piece := range pieces {
		p.add(piece)
		s, err := p.take(cutSettled)
		if err != nil {
			t.Fatalf("pieces %q: %v", pieces, err)
		}
		got = append(got, s...)
	}
	s, err := p.take(cutFinal)
	if err != nil {
		t.Fatalf("pieces %q at the end: %v", pieces, err)
	}
	return append(got, s...)
}

// TestPendingCutsAsWhole: a text cut in two at every character, and in
// many random pieces, gives the sentences of the whole text, each once and
// in order.
func TestPendingCutsAsWhole(t *testing.T) {
	if err := initFlite(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, voice := range []string{"slt", "kal16"} {
		for _, text := range pendingTexts {
			whole := cut(t, voice, []string{text})
			if len(whole) == 0 {
				t.Fatalf("%q has no sentences", text)
			}
			checkSpans(t, text, whole)
			for i := range text {
				if i == 0 {
					continue
				}
				if got := cut(t, voice, []string{text[:i], text[i:]}); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s: %q cut at %d gives %+v, whole %+v", voice, text, i, got, whole)
				}
			}
			for range 50 {
				pieces := randomPieces(rng, text)
				if got := cut(t, voice, pieces); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s: %q in pieces %q gives %+v, whole %+v", voice, text, pieces, got, whole)
				}
			}
		}
	}
}

// checkSpans checks that each sentence's span is the part of text it was
// cut from: in order, and cleaned, the sentence itself.
func checkSpans(t *testing.T, text string, ss []sentence) {
	t.Helper()
	runes := []rune(text)
	end := 0
	for _, s := range ss {
		if s.start < end || s.end <= s.start || s.end > len(runes) {
			t.Fatalf("%q: sentence %q has span [%d, %d) after %d", text, s.text, s.start, s.end, end)
		}
		if s.input != string(runes[s.start:s.end]) {
			t.Errorf("%q: sentence %q's input %q is not its span [%d, %d)", text, s.text, s.input, s.start, s.end)
		}
		if c, _ := cleanText(string(runes[s.start:s.end])); strings.TrimSpace(c) != s.text {
			t.Errorf("%q: the span [%d, %d) of sentence %q cleans to %q", text, s.start, s.end, s.text, c)
		}
		end = s.end
	}
}

// randomPieces cuts s at random character boundaries into pieces of one
// to ten characters, as an LLM's tokens come.
func randomPieces(rng *rand.Rand, s string) []string {
	var pieces []string
	for s != "" {
		n := 0
		for k := 1 + rng.IntN(10); k > 0 && n < len(s); k-- {
			_, size := utf8.DecodeRuneInString(s[n:])
			n += size
		}
		pieces = append(pieces, s[:n])
		s = s[n:]
	}
	return pieces
}

// TestTalkerStreamed: the talker gives the same chunks, byte for byte, for
// a text whole and in pieces, and speaks a complete sentence before the
// text's end arrives.
func TestTalkerStreamed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	slt := talkerFor(t, "slt")
	for _, text := range pendingTexts[:3] {
		whole, err := run(slt, "", engine.Chunk{Text: &engine.Text{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		var chunks []engine.Chunk
		for _, p := range randomPieces(rng, text) {
			chunks = append(chunks, engine.Chunk{Text: &engine.Text{Text: p}})
		}
		got, err := run(slt, "", chunks...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, whole) {
			t.Errorf("%q in pieces: %d chunks, whole: %d, or they differ", text, len(got), len(whole))
		}
	}

	// The first sentence is spoken while the input is still open.
	in := make(chan engine.Chunk, 1)
	out := make(chan engine.Chunk, 4)
	done := make(chan error, 1)
	go func() {
		done <- slt.Process(context.Background(), &engine.Job{In: engine.ChanSource(in), Out: chanSink(out)})
	}()
	in <- engine.Chunk{Text: &engine.Text{Text: "The first sentence is done. The sec"}}
	if c := <-out; c.Frames == nil {
		t.Fatalf("first chunk %+v", c)
	}
	in <- engine.Chunk{Text: &engine.Text{Text: "ond comes later."}}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Errorf("%d more chunks, want the second sentence's", len(out))
	}
}

// chanSink sends chunks on a channel.
type chanSink chan engine.Chunk

func (s chanSink) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestTalkerStreamedLimits: a streamed text may be longer in all than the
// text limit, which bounds what is held unspoken; a piece that holds more
// than the limit unspoken is refused.
func TestTalkerStreamedLimits(t *testing.T) {
	slt := talkerFor(t, "slt")
	sentence := "Words " + strings.Repeat("word ", 19) + "end. "
	var chunks []engine.Chunk
	for n := 0; n <= MaxTextRunes; n += len(sentence) {
		chunks = append(chunks, engine.Chunk{Text: &engine.Text{Text: sentence}})
	}
	out, err := run(slt, "", chunks...)
	if err != nil || len(out) != len(chunks) {
		t.Fatalf("%d sentences over %d characters: %d chunks, %v", len(chunks), len(chunks)*len(sentence), len(out), err)
	}
	_, err = run(slt, "", engine.Chunk{Text: &engine.Text{Text: "Hi. "}}, engine.Chunk{Text: &engine.Text{Text: strings.Repeat("w", MaxTextRunes+1)}})
	checkErr(t, err, "text is", "")
}

// TestSpansReachAudio: each sentence's chunk names its sentence and its
// span of the text, and the vocoder carries it onto the sentence's first
// audio block, for both kinds of voice.
func TestSpansReachAudio(t *testing.T) {
	text := "First one here. And the second!"
	for _, voice := range []string{"slt", "kal16"} {
		mid, err := run(talkerFor(t, voice), "", engine.Chunk{Text: &engine.Text{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		want := []engine.Span{{Sentence: 0, Start: 0, End: 15, Text: "First one here."}, {Sentence: 1, Start: 16, End: 31, Text: "And the second!"}}
		out, err := run(vocoderFor(t, voice), "", mid...)
		if err != nil {
			t.Fatal(err)
		}
		var spans []engine.Span
		first := true
		for _, c := range out {
			switch {
			case c.Span != nil && !first:
				t.Errorf("%s: a span on a block that does not begin a sentence: %+v", voice, *c.Span)
			case c.Span != nil:
				spans = append(spans, *c.Span)
			case first:
				t.Errorf("%s: a sentence's first block has no span", voice)
			}
			first = c.Audio.EndOfSentence
		}
		if !reflect.DeepEqual(spans, want) {
			t.Errorf("%s: spans %+v, want %+v", voice, spans, want)
		}
	}
}

// TestPendingCertainEnds: a sentence whose end more text cannot change
// (?, !, : or a blank line, then white space) is complete at once; one
// that ends in a full stop waits for the next word, or for a break.
func TestPendingCertainEnds(t *testing.T) {
	if err := initFlite(); err != nil {
		t.Fatal(err)
	}
	v, err := lookupVoice("slt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		mode cutMode
		want int
	}{
		{"Is it raining? ", cutSettled, 1},
		{"Stop now! ", cutSettled, 1},
		{"Note: ", cutSettled, 1},
		{"\"Really?\" ", cutSettled, 1},
		{"Hello there.\n\n", cutSettled, 1},
		{"Is it raining?", cutSettled, 0}, // "?!" may follow
		{"Hello there. ", cutSettled, 0},  // "Dr. Smith"?
		{"Hello there.\n", cutSettled, 0},
		{"Hello there. ", cutAll, 1},
		{"Dr. ", cutAll, 1},
		{"", cutAll, 0},
		{"Hello there. How are you? I am ", cutSettled, 2},
	} {
		p := pending{voice: v}
		p.add(tc.text)
		got, err := p.take(tc.mode)
		if err != nil || len(got) != tc.want {
			t.Errorf("%q (mode %d): %d sentences, %v; want %d", tc.text, tc.mode, len(got), err, tc.want)
		}
	}
}
