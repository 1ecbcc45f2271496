package flite

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// speechSeconds is the duration of speech that talker chunks describe.
func speechSeconds(chunks []engine.Chunk) float64 {
	var s float64
	for _, c := range chunks {
		if c.Frames != nil {
			s += float64(c.Frames.Len()) * float64(c.Frames.FrameShift)
		} else {
			s += float64(c.Segments.Ends[len(c.Segments.Ends)-1])
		}
	}
	return s
}

func reportRTF(b *testing.B, speech float64) {
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/speech, "rtf")
}

// BenchmarkTalker measures the talker's real-time factor (compute time per
// second of speech) on a paragraph of about 10 s.
func BenchmarkTalker(b *testing.B) {
	for _, voice := range Voices() {
		b.Run(voice, func(b *testing.B) {
			talker := talkerFor(b, voice)
			mid, err := run(talker, "", text(paragraphText))
			if err != nil {
				b.Fatal(err)
			}
			speech := speechSeconds(mid)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := run(talker, "", text(paragraphText)); err != nil {
					b.Fatal(err)
				}
			}
			reportRTF(b, speech)
		})
	}
}

// BenchmarkVocoder measures the vocoder's real-time factor on the same
// paragraph's talker output.
func BenchmarkVocoder(b *testing.B) {
	for _, voice := range Voices() {
		b.Run(voice, func(b *testing.B) {
			mid, err := run(talkerFor(b, voice), "", text(paragraphText))
			if err != nil {
				b.Fatal(err)
			}
			vocoder := vocoderFor(b, voice)
			speech := speechSeconds(mid)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := run(vocoder, "", mid...); err != nil {
					b.Fatal(err)
				}
			}
			reportRTF(b, speech)
		})
	}
}

// BenchmarkVocoderParallel vocodes the paragraph's sentences from one
// goroutine and from two at once, sharing b.N: ns/op is the wall time per
// paragraph, so two goroutines on two free cores take half of one's when
// vocodings scale (before the per-thread rand() they took turns under one
// lock). Compare goroutines-1 with goroutines-2 of one run.
func BenchmarkVocoderParallel(b *testing.B) {
	for _, voice := range []string{"slt", "kal16"} {
		mid, err := run(talkerFor(b, voice), "", text(paragraphText))
		if err != nil {
			b.Fatal(err)
		}
		speech := speechSeconds(mid)
		vocoder := vocoderFor(b, voice)
		for _, g := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/goroutines-%d", voice, g), func(b *testing.B) {
				b.ReportAllocs()
				var next atomic.Int64
				var wg sync.WaitGroup
				for range g {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if _, err := run(vocoder, "", mid...); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				reportRTF(b, speech)
			})
		}
	}
}

// pipe is a bounded channel between two stages, like the runtime's.
type pipe chan engine.Chunk

func (p pipe) Send(ctx context.Context, c engine.Chunk) error {
	select {
	case p <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p pipe) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-p:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// firstAudio runs a talker (produce) and the vocoder concurrently over a
// pipe, as the runtime streams them, and returns the time until the first
// audio chunk reaches the sink.
func firstAudio(b *testing.B, produce func(out engine.Sink) error, vocoder engine.Engine) time.Duration {
	ctx := context.Background()
	frames, audio := make(pipe, 2), make(pipe, 2)
	start := time.Now()
	errc := make(chan error, 2)
	go func() {
		err := produce(frames)
		close(frames)
		errc <- err
	}()
	go func() {
		err := vocoder.Process(ctx, &engine.Job{In: frames, Out: audio})
		close(audio)
		errc <- err
	}()
	var first time.Duration
	for range audio {
		if first == 0 {
			first = time.Since(start)
		}
	}
	for range 2 {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	return first
}

// BenchmarkFirstAudio measures the time to the first audio chunk of the
// paragraph when the talker streams it a sentence at a time ("sentences")
// versus synthesizing it as one utterance ("whole"). Its metric is
// ms-to-first-audio; ns/op is the whole request.
func BenchmarkFirstAudio(b *testing.B) {
	for _, voice := range []string{"slt", "kal16"} {
		talker, vocoder := talkerFor(b, voice), vocoderFor(b, voice)
		v, _ := lookupVoice(voice)
		clean, err := cleanText(paragraphText)
		if err != nil {
			b.Fatal(err)
		}
		modes := []struct {
			name    string
			produce func(out engine.Sink) error
		}{
			{"sentences", func(out engine.Sink) error {
				return talker.Process(context.Background(), &engine.Job{In: engine.NewSliceSource(text(paragraphText)), Out: out})
			}},
			{"whole", func(out engine.Sink) error {
				c, err := talker.(*Talker).sentence(request{voice: v}, clean)
				if err != nil {
					return err
				}
				return out.Send(context.Background(), c)
			}},
		}
		for _, m := range modes {
			b.Run(voice+"/"+m.name, func(b *testing.B) {
				b.ReportAllocs()
				var total time.Duration
				for b.Loop() {
					total += firstAudio(b, m.produce, vocoder)
				}
				b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms-to-first-audio")
			})
		}
	}
}

// longSentence is the paragraph as one sentence, about 11 s of speech.
func longSentence(tb testing.TB, voice string) engine.Chunk {
	tb.Helper()
	return oneUtterance(tb, voice, paragraphText)
}

// oneUtterance is the talker's chunk for s synthesized as one sentence.
func oneUtterance(tb testing.TB, voice, s string) engine.Chunk {
	tb.Helper()
	v, err := lookupVoice(voice)
	if err != nil {
		tb.Fatal(err)
	}
	clean, err := cleanText(s)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := talkerFor(tb, voice).(*Talker).sentence(request{voice: v}, clean)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// firstSink is a Sink that notes when its first chunk arrives.
type firstSink struct {
	start time.Time
	first time.Duration // 0 until the first chunk
}

func (s *firstSink) Send(ctx context.Context, c engine.Chunk) error {
	if s.first == 0 {
		s.first = time.Since(s.start)
	}
	return nil
}

// BenchmarkFirstBlock measures the vocoder alone on one sentence, short
// ("Hello there.", about 1 s of speech) or long (the paragraph as one
// sentence, about 11 s): first-block-ms is the time from the call to
// Process to its first audio chunk, ns/op the whole sentence.
func BenchmarkFirstBlock(b *testing.B) {
	for _, voice := range []string{"slt", "kal16"} {
		vocoder := vocoderFor(b, voice)
		for _, s := range []struct{ name, text string }{{"short", "Hello there."}, {"long", paragraphText}} {
			c := oneUtterance(b, voice, s.text)
			b.Run(voice+"/"+s.name, func(b *testing.B) {
				b.ReportAllocs()
				var first time.Duration
				for b.Loop() {
					sink := &firstSink{start: time.Now()}
					if err := vocoder.Process(context.Background(), &engine.Job{In: engine.NewSliceSource(c), Out: sink}); err != nil {
						b.Fatal(err)
					}
					first += sink.first
				}
				b.ReportMetric(first.Seconds()*1000/float64(b.N), "first-block-ms")
				b.ReportMetric(speechSeconds([]engine.Chunk{c}), "speech-s")
			})
		}
	}
}
