package sphinx

// Reading a request's audio: checked, and brought to 16 kHz as it
// arrives.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// readAudio reads src to its end, checks every chunk and returns the audio
// at 16 kHz with the input's duration in milliseconds.
func readAudio(ctx context.Context, src engine.Source) (pcm []int16, durMs int, err error) {
	in := &audioReader{src: src}
	for {
		if _, err := in.next(ctx); errors.Is(err, io.EOF) {
			return in.finish()
		} else if err != nil {
			return nil, 0, err
		}
	}
}

// audioReader reads a request's audio and brings it to 16 kHz as it
// arrives.
type audioReader struct {
	src  engine.Source
	rate int              // the input's rate; 0 before the first chunk
	n    int              // input samples
	rs   *audio.Resampler // nil when the input is at 16 kHz
	pcm  []int16          // the audio so far, at 16 kHz
	span *engine.Span     // the span the last chunk read carries, or nil
}

// next reads one chunk, and reports whether it marks a sentence's end;
// r.span is then the sentence span it carries. It returns io.EOF when the
// audio has ended.
func (r *audioReader) next(ctx context.Context) (bool, error) {
	c, err := r.src.Recv(ctx)
	if err != nil {
		return false, err
	}
	if c.Audio == nil {
		return false, &engine.InputError{Reason: fmt.Sprintf("aligner input must be audio, got %q", c.Kind())}
	}
	r.span = c.Span
	rate := c.Audio.SampleRate
	switch {
	case r.rate == 0:
		if rate < MinSampleRate || rate > MaxSampleRate {
			return false, &engine.InputError{Reason: fmt.Sprintf("sample rate %d Hz is outside [%d, %d]", rate, MinSampleRate, MaxSampleRate)}
		}
		if rate != decoderRate {
			if r.rs, err = audio.NewResampler(rate, decoderRate); err != nil {
				return false, &engine.InputError{Reason: fmt.Sprintf("sample rate %d Hz: %v", rate, err)}
			}
		}
		r.rate = rate
	case rate != r.rate:
		return false, &engine.InputError{Reason: fmt.Sprintf("sample rate changed from %d Hz to %d Hz", r.rate, rate)}
	}
	r.n += len(c.Audio.Samples)
	if r.n > MaxAudioSeconds*rate {
		return false, &engine.InputError{Reason: fmt.Sprintf("audio is longer than %d s", MaxAudioSeconds)}
	}
	if r.rs != nil {
		r.pcm = r.rs.AppendProcess(r.pcm, c.Audio.Samples)
	} else {
		r.pcm = append(r.pcm, c.Audio.Samples...)
	}
	return c.Audio.EndOfSentence, nil
}

// finish returns the whole audio at 16 kHz and its duration as it came in.
// Resampled audio is cut to that duration: the resampler's last sample
// may lie past it.
func (r *audioReader) finish() ([]int16, int, error) {
	if r.n == 0 {
		return nil, 0, &engine.InputError{Reason: "no audio"}
	}
	if r.rs != nil {
		r.pcm = r.rs.AppendFlush(r.pcm)
		r.pcm = r.pcm[:min(len(r.pcm), int(int64(r.n)*decoderRate/int64(r.rate)))]
	}
	return r.pcm, int(int64(r.n) * 1000 / int64(r.rate)), nil
}
