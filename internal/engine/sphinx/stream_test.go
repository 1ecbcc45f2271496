package sphinx

// Tests of the alignment as the audio arrives: a sentence at a time, its
// words as soon as they are settled.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// chanSource yields the chunks sent on its channel until it is closed.
type chanSource chan engine.Chunk

func (s chanSource) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-s:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// chanSink passes each chunk sent to it on its channel.
type chanSink chan engine.Chunk

func (s chanSink) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case s <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// committee is the README's bench paragraph: six sentences of about 3 s.
const committee = "The committee met on Tuesday to review the budget. After a long discussion, they agreed to fund three new projects. " +
	"The first one will improve the city library. The second will repair the old bridge near the river. " +
	"The third will build a small park for children. Everyone left the meeting feeling hopeful about the future."

// spoken is a text's speech as the vocoder sends it: each sentence
// synthesized alone, in blocks of streamBlock samples (the last one of a
// sentence shorter), then the sentence's end mark.
type spoken struct {
	sentences [][]engine.Chunk // each sentence's blocks and its mark
	tail      []engine.Chunk   // what comes after the last mark
	entries   []engine.Word    // flite's own times, by input token
	durMs     int
}

func (s spoken) chunks() []engine.Chunk {
	var out []engine.Chunk
	for _, c := range s.sentences {
		out = append(out, c...)
	}
	return append(out, s.tail...)
}

// speakSentences synthesizes each of text's sentences (as the talker cuts
// them) on its own, as the pipeline does.
func speakSentences(t testing.TB, text, voice string) spoken {
	t.Helper()
	words, err := transcript(text, voice)
	if err != nil {
		t.Fatal(err)
	}
	runes := []rune(text)
	groups := bySentence(words)
	var sp spoken
	var truth []engine.Word
	samples := 0
	for i, g := range groups {
		end := len(runes)
		if i+1 < len(groups) {
			end = groups[i+1][0].charStart
		}
		s := synth(t, string(runes[g[0].charStart:end]), voice)
		if len(s.truth) != len(g) {
			t.Fatalf("sentence %d: flite spoke %d words alone, %d in the text", i, len(s.truth), len(g))
		}
		offsetMs := samples * 1000 / decoderRate
		for _, w := range s.truth {
			w.StartMs += offsetMs
			w.EndMs += offsetMs
			truth = append(truth, w)
		}
		var cs []engine.Chunk
		pcm := s.audio.Samples
		for j := 0; j < len(pcm); j += streamBlock {
			cs = append(cs, engine.Chunk{Audio: &engine.Audio{SampleRate: decoderRate, Samples: pcm[j:min(j+streamBlock, len(pcm))]}})
		}
		cs = append(cs, engine.Chunk{Audio: &engine.Audio{SampleRate: decoderRate, EndOfSentence: true}})
		sp.sentences = append(sp.sentences, cs)
		samples += len(pcm)
	}
	sp.entries = entries(text, words, truth)
	sp.durMs = samples * 1000 / decoderRate
	return sp
}

// TestStreamedAccuracy aligns speech as the vocoder sends it (and as the
// enhance stage sends it at 24 kHz), for every voice, and checks the
// timestamps against flite's own.
func TestStreamedAccuracy(t *testing.T) {
	a := sharedAligner(t)
	for _, voice := range []string{"slt", "rms", "awb", "kal16"} {
		t.Run(voice, func(t *testing.T) {
			var spoken []spoken
			for _, text := range append([]string{committee}, sentences...) {
				spoken = append(spoken, speakSentences(t, text, voice))
			}
			for _, rate := range []int{decoderRate, 24000} {
				sum, n := 0.0, 0
				for i, text := range append([]string{committee}, sentences...) {
					sp := spoken[i].at(t, rate)
					got, err := run(context.Background(), a, text, sp.chunks()...)
					if err != nil {
						t.Fatal(err)
					}
					mean := checkWords(t, got, sp.entries, sp.durMs)
					sum += mean * float64(len(got))
					n += len(got)
				}
				mean := sum / float64(n)
				t.Logf("%s at %d Hz: mean boundary error %.1f ms over %d entries", voice, rate, mean, n)
				if mean > maxMeanErrorMs {
					t.Errorf("%s at %d Hz: mean boundary error %.1f ms, want <= %d", voice, rate, mean, maxMeanErrorMs)
				}
			}
		})
	}
}

// recvWords waits for the next chunk of timestamps, for a minute at most.
func recvWords(t *testing.T, out chanSink, done chan error, what string) []engine.Word {
	t.Helper()
	select {
	case c := <-out:
		if c.Words == nil || len(c.Words.Words) == 0 {
			t.Fatalf("%s: chunk %q, want timestamps", what, c.Kind())
		}
		return c.Words.Words
	case err := <-done:
		t.Fatalf("%s: Process returned %v first", what, err)
	case <-time.After(time.Minute):
		t.Fatalf("%s: no timestamps after a minute", what)
	}
	return nil
}

// at returns the speech at rate, resampled as one stream as an enhance
// stage does it: each block's samples so far, the marks kept, and the
// resampler's tail after the last mark.
func (s spoken) at(t testing.TB, rate int) spoken {
	t.Helper()
	if rate == decoderRate {
		return s
	}
	rs, err := audio.NewResampler(decoderRate, rate)
	if err != nil {
		t.Fatal(err)
	}
	out := s
	out.sentences = nil
	for _, cs := range s.sentences {
		var resampled []engine.Chunk
		for _, c := range cs {
			resampled = append(resampled, engine.Chunk{Audio: &engine.Audio{SampleRate: rate, Samples: rs.Process(c.Audio.Samples), EndOfSentence: c.Audio.EndOfSentence}})
		}
		out.sentences = append(out.sentences, resampled)
	}
	out.tail = []engine.Chunk{{Audio: &engine.Audio{SampleRate: rate, Samples: rs.Flush()}}}
	return out
}

// TestStreamedSentences feeds the aligner speech a block at a time, as the
// vocoder sends it (at 16 kHz, and resampled to 24 kHz as the enhance
// stage sends it). The first sentence's first words must come before its
// last block, every sentence's words before the next sentence's first
// block, and the timestamps must be those of the whole input given at
// once.
func TestStreamedSentences(t *testing.T) {
	a := sharedAligner(t)
	text := committee
	slt := speakSentences(t, text, "slt")
	for _, rate := range []int{decoderRate, 24000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			sp := slt.at(t, rate)
			want, err := run(context.Background(), a, text, sp.chunks()...)
			if err != nil {
				t.Fatal(err)
			}
			got := feedBlocks(t, a, text, sp, rate)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("fed a block at a time:\n got %v\nwant %v", got, want)
			}
			mean := checkWords(t, got, sp.entries, sp.durMs)
			t.Logf("mean boundary error %.1f ms over %d entries", mean, len(got))
		})
	}
}

// feedBlocks runs a on sp, audio at rate, a block at a time, and checks
// when the timestamps come (see TestStreamedSentences). The aligner reads
// its input ahead, so the first sentence's last block is held back until
// its first words have come.
func feedBlocks(t *testing.T, a *Aligner, text string, sp spoken, rate int) []engine.Word {
	in, out := make(chanSource), make(chanSink)
	done := make(chan error, 1)
	go func() {
		done <- a.Process(context.Background(), &engine.Job{Prompt: engine.Prompt{Text: text}, In: in, Out: out})
	}()
	var got []engine.Word
	send := func(c engine.Chunk) {
		for {
			select {
			case in <- c:
				return
			case w := <-out:
				got = append(got, w.Words.Words...)
			case err := <-done:
				t.Fatalf("Process returned %v before its input ended", err)
			}
		}
	}
	for i, cs := range sp.sentences {
		blocks, mark := cs[:len(cs)-1], cs[len(cs)-1]
		for _, c := range blocks[:len(blocks)-1] {
			send(c)
		}
		if i == 0 && len(got) == 0 {
			got = append(got, recvWords(t, out, done, "the first sentence before its last block")...)
		}
		send(blocks[len(blocks)-1])
		send(mark)
		for len(got) < sentenceEntries(sp, i, rate) {
			got = append(got, recvWords(t, out, done, fmt.Sprintf("sentence %d", i))...)
		}
		if len(got) != sentenceEntries(sp, i, rate) {
			t.Fatalf("sentence %d: %d entries so far, want %d", i, len(got), sentenceEntries(sp, i, rate))
		}
	}
	for _, c := range sp.tail {
		send(c)
	}
	close(in)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

// sentenceEntries is how many entries the sentences up to i have, their
// audio at rate.
func sentenceEntries(sp spoken, i, rate int) int {
	end := 0
	for _, c := range sp.sentences[:i+1] {
		for _, b := range c {
			end += len(b.Audio.Samples)
		}
	}
	endMs := end * 1000 / rate
	n := 0
	for _, e := range sp.entries {
		if e.StartMs < endMs {
			n++
		}
	}
	return n
}

// TestStreamedChunking checks that the timestamps of speech with sentence
// marks do not depend on how the audio between the marks is cut.
func TestStreamedChunking(t *testing.T) {
	a := sharedAligner(t)
	text := sentences[2]
	sp := speakSentences(t, text, "awb")
	want, err := run(context.Background(), a, text, sp.chunks()...)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cut := range []string{"whole", "random", "samples"} {
		var chunks []engine.Chunk
		for _, cs := range sp.sentences {
			var pcm []int16
			for _, c := range cs {
				pcm = append(pcm, c.Audio.Samples...)
			}
			for i := 0; i < len(pcm); {
				n := len(pcm)
				switch cut {
				case "random":
					n = 1 + rng.IntN(5000)
				case "samples":
					n = 1 + i%7
				}
				end := min(i+n, len(pcm))
				chunks = append(chunks, engine.Chunk{Audio: &engine.Audio{SampleRate: decoderRate, Samples: pcm[i:end]}})
				i = end
			}
			chunks = append(chunks, cs[len(cs)-1])
		}
		got, err := run(context.Background(), a, text, chunks...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("cut %s, %d chunks:\n got %v\nwant %v", cut, len(chunks), got, want)
		}
	}
}

// TestStreamedSentencesMismatch checks that audio marked into fewer
// sentences than the transcript has still gets every word timed, in order.
func TestStreamedSentencesMismatch(t *testing.T) {
	a := sharedAligner(t)
	text := "Please call Stella. Ask her to bring these things with her from the store."
	s := synth(t, text, "slt") // one utterance: one mark for two sentences
	sink := &engine.SliceSink{}
	err := a.Process(context.Background(), &engine.Job{
		Prompt: engine.Prompt{Text: text},
		In:     engine.NewSliceSource(engine.Chunk{Audio: s.audio}, engine.Chunk{Audio: &engine.Audio{SampleRate: s.audio.SampleRate, EndOfSentence: true}}),
		Out:    sink,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := engine.JoinWords(sink.Chunks)
	if len(got) != len(s.entries) {
		t.Fatalf("%d entries, want %d", len(got), len(s.entries))
	}
	checkShape(t, got, durationMs(s.audio))
}

// TestUnmarkedSentences aligns the speech of several sentences that comes
// with no marks at all: every word is timed, as closely as when marked.
func TestUnmarkedSentences(t *testing.T) {
	a := sharedAligner(t)
	text := sentences[2]
	sp := speakSentences(t, text, "slt")
	var chunks []engine.Chunk
	for _, c := range sp.chunks() {
		if !c.Audio.EndOfSentence {
			chunks = append(chunks, c)
		}
	}
	got, err := run(context.Background(), a, text, chunks...)
	if err != nil {
		t.Fatal(err)
	}
	mean := checkWords(t, got, sp.entries, sp.durMs)
	t.Logf("mean boundary error %.1f ms over %d entries", mean, len(got))
	if mean > maxMeanErrorMs {
		t.Errorf("mean boundary error %.1f ms, want <= %d", mean, maxMeanErrorMs)
	}
}
