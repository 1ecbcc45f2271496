package flite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"go.uber.org/goleak"
)

func TestBlockSamples(t *testing.T) {
	for _, tc := range []struct{ rate, step, want int }{
		{16000, 80, 1600},
		{16000, 1, 1600},
		{8000, 40, 800},
		{22050, 110, 2200},  // 2205 samples in 100 ms: 20 whole frames
		{16000, 3000, 3000}, // a frame longer than a block: one frame
	} {
		if got := blockSamples(tc.rate, tc.step); got != tc.want {
			t.Errorf("blockSamples(%d, %d) = %d, want %d", tc.rate, tc.step, got, tc.want)
		}
	}
	if err := initFlite(); err != nil {
		t.Fatal(err)
	}
	for _, v := range voices {
		if v.kind == engine.KindFrames && (v.frameSamples != 80 || v.blockSamples != block) {
			t.Errorf("%s: %d samples per frame, blocks of %d; want 80 and %d", v.name, v.frameSamples, v.blockSamples, block)
		}
	}
}

// sentenceChunks runs the talker on text with params and returns its chunks.
func sentenceChunks(tb testing.TB, voice, s, params string) []engine.Chunk {
	tb.Helper()
	mid, err := run(talkerFor(tb, voice), params, text(s))
	if err != nil {
		tb.Fatalf("talker: %v", err)
	}
	return mid
}

// wholeSentence vocodes one talker chunk with one synthesis call, the way
// the vocoder worked before it streamed.
func wholeSentence(tb testing.TB, c engine.Chunk, seed uint32) *engine.Audio {
	tb.Helper()
	var a *engine.Audio
	var err error
	if c.Frames != nil {
		v, _ := lookupVoice(c.Frames.Voice)
		a, err = vocodeFrames(v, c.Frames, seed, nil)
	} else {
		v, _ := lookupVoice(c.Segments.Voice)
		a, err = vocodeSegments(v, c.Segments, seed)
	}
	if err != nil {
		tb.Fatalf("whole-sentence vocoding: %v", err)
	}
	return a
}

// TestVocoderBlocksMatchWholeSentence checks the streamed blocks against
// one whole-sentence synthesis for every voice, seeds and speeds: each
// sentence comes in blocks of exactly 100 ms but its last, and the blocks
// hold the very same samples.
func TestVocoderBlocksMatchWholeSentence(t *testing.T) {
	for _, voice := range Voices() {
		vocoder := vocoderFor(t, voice)
		for _, speed := range []string{"0.5", "1", "2"} {
			mid := sentenceChunks(t, voice, fewSentences, `{"speed": `+speed+`}`)
			for _, seed := range []uint32{0, 1, 7, 4000000000} {
				t.Run(fmt.Sprintf("%s/speed-%s/seed-%d", voice, speed, seed), func(t *testing.T) {
					out, err := run(vocoder, fmt.Sprintf(`{"seed": %d}`, seed), mid...)
					if err != nil {
						t.Fatal(err)
					}
					checkBlocks(t, out)
					whole := make([]*engine.Audio, len(mid))
					lens := make([]int, len(mid))
					for i, c := range mid {
						whole[i] = wholeSentence(t, c, seed)
						lens[i] = len(whole[i].Samples)
					}
					for i, got := range bySentence(t, out, lens) {
						if d := firstDiff(got, whole[i].Samples); d >= 0 {
							t.Errorf("sentence %d: blocks differ from the whole-sentence synthesis at sample %d of %d", i, d, lens[i])
						}
					}
				})
			}
		}
	}
}

// stopAfter is a blockStream context that ends at its (n+1)th Err call:
// blockStream.live calls Err once per block flite hands over, on the
// goroutine running the synthesis.
type stopAfter struct {
	context.Context
	n, calls int
}

func (c *stopAfter) Err() error {
	c.calls++
	if c.calls > c.n {
		return context.Canceled
	}
	return nil
}

// TestStreamStopsAtNextBlock stops a clustergen synthesis after n blocks:
// flite must stop right there (n blocks queued, no more), and the blocks it
// handed over are final: the start of the whole-sentence audio.
func TestStreamStopsAtNextBlock(t *testing.T) {
	mid := sentenceChunks(t, "slt", oneSentence, "")
	f := mid[0].Frames
	v, _ := lookupVoice("slt")
	whole := wholeSentence(t, mid[0], DefaultSeed).Samples
	if len(whole) < 5*block {
		t.Fatalf("sentence of %d samples is too short for this test", len(whole))
	}
	for _, n := range []int{0, 1, 3} {
		ctx := &stopAfter{Context: context.Background(), n: n}
		s := &blockStream{ctx: ctx, blocks: make(chan *engine.Audio, len(whole)/block+1)}
		if _, err := vocodeFrames(v, f, DefaultSeed, s); !errors.Is(err, errStopped) {
			t.Fatalf("stop after %d blocks: %v, want errStopped", n, err)
		}
		close(s.blocks)
		var got []int16
		for a := range s.blocks {
			got = append(got, a.Samples...)
		}
		if len(got) != n*block || ctx.calls != n+1 || firstDiff(got, whole[:len(got)]) >= 0 {
			t.Errorf("stop after %d blocks: got %d samples after %d callbacks, differing from the whole sentence at %d", n, len(got), ctx.calls, firstDiff(got, whole[:len(got)]))
		}
	}
}

// sinkFunc is a Sink that calls the function.
type sinkFunc func(ctx context.Context, c engine.Chunk) error

func (f sinkFunc) Send(ctx context.Context, c engine.Chunk) error { return f(ctx, c) }

// TestVocoderStopsMidSentence ends a request after its first block, by
// cancelling ctx or by a failing sink: Process must return that error with
// only part of the sentence sent and leave no goroutine behind; the next
// synthesis on the goroutine's thread is a lone run's again.
func TestVocoderStopsMidSentence(t *testing.T) {
	defer goleak.VerifyNone(t)
	errGone := errors.New("downstream gone")
	for _, voice := range []string{"slt", "kal16"} {
		c := longSentence(t, voice)
		whole := wholeSentence(t, c, DefaultSeed).Samples
		vocoder := vocoderFor(t, voice)
		for _, tc := range []struct {
			name string
			want error
		}{{"cancel", context.Canceled}, {"sink error", errGone}} {
			t.Run(voice+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var sent int
				sink := sinkFunc(func(ctx context.Context, c engine.Chunk) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					if sent > 0 {
						if tc.want == errGone {
							return errGone
						}
						cancel()
						return ctx.Err()
					}
					sent += len(c.Audio.Samples)
					return nil
				})
				err := vocoder.Process(ctx, &engine.Job{In: engine.NewSliceSource(c), Out: sink})
				if !errors.Is(err, tc.want) {
					t.Fatalf("Process: %v, want %v", err, tc.want)
				}
				if sent != block {
					t.Errorf("sent %d samples of %d, want the first block only", sent, len(whole))
				}
				if d := firstDiff(wholeSentence(t, c, DefaultSeed).Samples, whole); d >= 0 {
					t.Errorf("the synthesis after a stopped one differs at sample %d", d)
				}
			})
		}
	}
}

// TestSlowConsumerDoesNotStallSynthesis blocks the consumer on the first
// block: meanwhile the same sentence vocoded on another goroutine must
// come out whole and the same (no synthesis waits for another's
// consumer, nor shares its noise), and the blocked one's audio must come
// out whole once its consumer moves on.
func TestSlowConsumerDoesNotStallSynthesis(t *testing.T) {
	c := longSentence(t, "slt")
	whole := wholeSentence(t, c, DefaultSeed).Samples
	vocoder := vocoderFor(t, "slt")
	first, release := make(chan struct{}), make(chan struct{})
	var got []engine.Chunk
	sink := sinkFunc(func(ctx context.Context, c engine.Chunk) error {
		if len(got) == 0 {
			close(first)
			<-release
		}
		got = append(got, c)
		return nil
	})
	done := make(chan error, 1)
	go func() {
		done <- vocoder.Process(context.Background(), &engine.Job{In: engine.NewSliceSource(c), Out: sink})
	}()
	<-first
	other, err := run(vocoder, "", c)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if d := firstDiff(concat(other), whole); d >= 0 {
		t.Errorf("the vocoding beside a blocked one differs at sample %d", d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, got)
	if d := firstDiff(bySentence(t, got, []int{len(whole)})[0], whole); d >= 0 {
		t.Errorf("audio differs from the whole sentence at sample %d", d)
	}
}
