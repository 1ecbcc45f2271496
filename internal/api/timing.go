package api

// Word timestamps on the timeline of an answer's audio format: moved by
// the encoder delay that the format cannot tell decoders to skip.

import (
	"time"

	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
)

// encodeOptions returns the encoder options of a speech answer: the
// defaults, and encode.Options.Stream for a streamed one (stream_format
// audio or sse), whose start cannot be completed at its end.
func encodeOptions(streamed bool) encode.Options {
	return encode.Options{Stream: streamed}
}

// leadMs returns encode.Lead of format for audio at rate Hz, whole or
// streamed, in whole milliseconds: how much later than in the audio a
// player plays each of its words from the answer's file. It is 0 but for
// aac, whose ADTS frames cannot state the encoder's priming (64 ms at 16
// kHz, 43 at 24 kHz), and a streamed mp3, which has no Info tag to state
// LAME's delay (69 ms at 16 kHz, 46 at 24 kHz).
func leadMs(format string, rate int, streamed bool) int {
	return int((encode.Lead(format, rate, encodeOptions(streamed)) + time.Millisecond/2) / time.Millisecond)
}

// shiftWords returns words moved ms milliseconds later, a copy when ms is
// not 0.
func shiftWords(words []engine.Word, ms int) []engine.Word {
	if ms == 0 {
		return words
	}
	out := make([]engine.Word, len(words))
	for i, w := range words {
		w.StartMs += ms
		w.EndMs += ms
		out[i] = w
	}
	return out
}
