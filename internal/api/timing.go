package api

// Word timestamps on the timeline of an answer's audio format: moved by
// the encoder delay that the format cannot tell decoders to skip.

import (
	"time"

	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
)

// encodeOptions are the encoder options of every speech answer: the
// defaults.
var encodeOptions = encode.Options{}

// leadMs returns encode.Lead of format for audio at rate Hz, in whole
// milliseconds: how much later than in the audio a player plays each of
// its words from the answer's file. It is 0 but for aac, whose ADTS frames
// cannot state the encoder's priming (64 ms at 16 kHz, 43 at 24 kHz).
func leadMs(format string, rate int) int {
	return int((encode.Lead(format, rate, encodeOptions) + time.Millisecond/2) / time.Millisecond)
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
