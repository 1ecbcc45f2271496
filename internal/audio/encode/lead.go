package encode

// Lead: how much later than in the input a decoder plays each sample of a
// format, from the encoder delay the format cannot signal.

/*
#include <lame/lame.h>
*/
import "C"

import (
	"sync"
	"time"
)

// mp3DecoderDelay is the delay of an MPEG Layer III decoder's synthesis
// filter bank, in samples, which LAME's tag does not count and decoders
// skip along with its encoder delay (ffmpeg and mpg123 both skip 529).
const mp3DecoderDelay = 529

// aacPriming is the encoder delay of ffmpeg's AAC encoder, in samples at
// the rate it encodes (its initial_padding): one frame.
const aacPriming = 1024

// Lead returns how much later than in the input every sample plays, when
// a decoder plays a file of format, encoded from sampleRate Hz with opts,
// from its start: the encoder's delay that the format does not tell
// decoders to skip, which they play as silence first. It is 0 for opus
// (Ogg Opus states its pre-skip), flac, wav and pcm, and for an mp3 file
// whose frames have room for the Info tag that states LAME's delay (at
// the default bitrate, at every rate). It is aacPriming samples at aac's
// rate (64 ms at 16 kHz), as ADTS has no field for it, and, for an mp3
// without a tag (opts.Stream, or a bitrate too low for the tag), LAME's
// and the decoder's delay (1105 samples: 69 ms at 16 kHz, 46 at 24). An
// input New refuses has a Lead of 0.
//
// Timestamps of the input's samples, moved later by Lead, are the times
// at which a player plays them.
func Lead(format string, sampleRate int, opts Options) time.Duration {
	if check(format, sampleRate, &opts) != nil {
		return 0
	}
	samples, rate := 0, sampleRate
	switch format {
	case AAC:
		samples, rate = aacPriming, nextRate(sampleRate, aacRates)
	case MP3:
		p, err := mp3Setup(sampleRate, opts.Bitrate)
		if err != nil || (p.tagBytes > 0 && !opts.Stream) {
			return 0
		}
		samples, rate = p.delay+mp3DecoderDelay, p.outRate
	}
	return time.Duration(samples) * time.Second / time.Duration(rate)
}

// mp3Setups caches mp3Setup's answers.
var mp3Setups sync.Map // mp3SetupKey → mp3Params

type mp3SetupKey struct{ rate, bitrate int }

// mp3Setup returns the parameters LAME picks for input at rate Hz and
// bitrate bit/s.
func mp3Setup(rate, bitrate int) (mp3Params, error) {
	k := mp3SetupKey{rate, bitrate}
	if p, ok := mp3Setups.Load(k); ok {
		return p.(mp3Params), nil
	}
	lame, p, err := newLAME(rate, Options{Bitrate: bitrate})
	if err != nil {
		return p, err
	}
	C.lame_close(lame)
	mp3Setups.Store(k, p)
	return p, nil
}
