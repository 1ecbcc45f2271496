package encode

// The formats, their content types and options, and New, which picks the
// encoder of a format.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"

	"github.com/omnistage/omnistage/internal/audio"
)

// The formats, named as OpenAI's response_format names them.
const (
	MP3  = "mp3"
	Opus = "opus"
	AAC  = "aac"
	FLAC = "flac"
	WAV  = "wav"
	PCM  = "pcm"
)

// formats lists the formats with their content types, in the order Formats
// returns them.
var formats = []struct{ name, contentType string }{
	{MP3, "audio/mpeg"},
	{Opus, "audio/opus"},
	{AAC, "audio/aac"},
	{FLAC, "audio/flac"},
	{WAV, "audio/wav"},
	{PCM, "audio/pcm"},
}

// Formats returns the names of the formats New encodes, mp3 first.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}

// ContentType returns the Content-Type of format as OpenAI's speech endpoint
// sends it, and whether format is one of Formats.
func ContentType(format string) (string, bool) {
	for _, f := range formats {
		if f.name == format {
			return f.contentType, true
		}
	}
	return "", false
}

var (
	// ErrUnsupported reports a request no encoder can honour: an unknown
	// format, a sample rate or bitrate outside the format's range, or a
	// known length that the stream does not match. It is the caller's
	// error.
	ErrUnsupported = errors.New("unsupported")
	// ErrUnavailable reports a format this process cannot encode, such as
	// aac when ffmpeg is not on PATH; the error's message names the reason.
	ErrUnavailable = errors.New("unavailable")
)

// Options tunes an encoder. The zero value picks the defaults.
type Options struct {
	// Bitrate is the target bitrate of mp3, opus and aac in bits per
	// second; 0 picks the format's default (DefaultBitrate). The lossless
	// formats ignore it. mp3 rounds it to the nearest bitrate its MPEG
	// version allows at the output rate; ffmpeg's AAC encoder caps it at
	// 6144 bits a frame (96 kbit/s at 16 kHz).
	Bitrate int
	// TotalSamples is the number of samples the stream will hold, when it
	// is known before the first Write; 0 means unknown. wav states it in
	// its header (or 0xFFFFFFFF, "to the end of the stream", when unknown)
	// and flac in its STREAMINFO block (or 0, "unknown"); both then fail
	// if a different number is written. The other formats ignore it.
	TotalSamples int64
	// OggSerial is the serial number of opus's Ogg stream; 0 picks a
	// random one, as RFC 3533 advises so that streams can be chained. Set
	// it to make the output a function of the input alone.
	OggSerial uint32
	// Stream says that the output goes out as it is encoded, so that its
	// start cannot be rewritten once the end is known, as in a streamed
	// response. Only mp3 depends on it: a stream has no Info tag, and
	// decoders play LAME's encoder delay and their own first, which Lead
	// then counts. Without Stream, mp3 starts with the frame LAME reserves
	// for its tag, which Whole fills in at the end and New leaves empty
	// (decoders play it as a frame of silence): set Stream for any output
	// of New.
	Stream bool
}

// DefaultBitrate returns the bitrate format encodes at when Options.Bitrate
// is 0, in bits per second, or 0 for a lossless format.
func DefaultBitrate(format string) int {
	switch format {
	case MP3:
		return 64000
	case Opus:
		return 32000
	case AAC:
		return 64000
	}
	return 0
}

// bitrateRange bounds Options.Bitrate per lossy format, in bits per second.
var bitrateRange = map[string][2]int{
	MP3:  {8000, 320000},
	Opus: {6000, 256000},
	AAC:  {8000, 320000},
}

// Encoder is a streaming encoder of mono 16-bit PCM into one audio format.
// Output reaches w as it is encoded, less what the codec holds back to
// complete a frame, page or block, and w is written only during Write and
// Close, on the caller's goroutine. The bytes written do not depend on how
// the samples were split between calls to Write (for aac, because ffmpeg
// reads its input in fixed-size packets).
//
// An Encoder is not safe for concurrent use. After Write or Close returns
// an error the encoder is dead: later calls return that error.
type Encoder interface {
	// Write encodes samples, which are not retained. Write(nil) writes to
	// w whatever the encoder has ready (only aac's encoder runs on its own
	// and can have output ready between calls).
	Write(samples []int16) error
	// Close encodes the rest of the stream, writes its trailer and frees
	// the encoder's resources, also after an error. It does not close w.
	// Close after Close returns the first Close's result.
	Close() error
}

// New returns an Encoder of format writing to w, for mono 16-bit PCM at
// sampleRate Hz. An unknown format, a sample rate outside [audio.MinRate,
// audio.MaxRate] or a bitrate outside the format's range is an
// ErrUnsupported error; a format this process cannot encode is an
// ErrUnavailable error. New writes nothing to w.
func New(format string, w io.Writer, sampleRate int, opts Options) (Encoder, error) {
	if err := check(format, sampleRate, &opts); err != nil {
		return nil, err
	}
	switch format {
	case MP3:
		return newMP3(w, sampleRate, opts)
	case Opus:
		return newOpus(w, sampleRate, opts)
	case AAC:
		return newAAC(w, sampleRate, opts)
	case FLAC:
		return newFLAC(w, sampleRate, opts)
	case WAV:
		return newWAV(w, sampleRate, opts), nil
	default:
		return newPCM(w), nil
	}
}

// check checks New's arguments, and sets opts.Bitrate's default.
func check(format string, sampleRate int, opts *Options) error {
	if _, ok := ContentType(format); !ok {
		return fmt.Errorf("encode: format %q: %w (want one of %v)", format, ErrUnsupported, Formats())
	}
	if sampleRate < audio.MinRate || sampleRate > audio.MaxRate {
		return fmt.Errorf("encode: %s: sample rate %d Hz: %w (want %d to %d Hz)",
			format, sampleRate, ErrUnsupported, audio.MinRate, audio.MaxRate)
	}
	if opts.TotalSamples < 0 {
		return fmt.Errorf("encode: %s: %d total samples: %w", format, opts.TotalSamples, ErrUnsupported)
	}
	if r, ok := bitrateRange[format]; ok {
		switch {
		case opts.Bitrate == 0:
			opts.Bitrate = DefaultBitrate(format)
		case opts.Bitrate < r[0] || opts.Bitrate > r[1]:
			return fmt.Errorf("encode: %s: bitrate %d bit/s: %w (want %d to %d)",
				format, opts.Bitrate, ErrUnsupported, r[0], r[1])
		}
	}
	return nil
}

// errClosed is what Write returns after Close.
var errClosed = errors.New("encode: write after close")

// lengthError reports a stream whose length is not the Options.TotalSamples
// its header stated.
func lengthError(format string, got, want int64) error {
	return fmt.Errorf("encode: %s: %d samples written, %d announced: %w", format, got, want, ErrUnsupported)
}

// Whole encodes all of samples, at sampleRate Hz, as one file of format,
// with the header that only the end can complete: mp3's Info tag, with
// the file's length, encoder delay and padding, unless opts.Stream asks
// for a stream's bytes.
func Whole(format string, sampleRate int, samples []int16, opts Options) ([]byte, error) {
	var b bytes.Buffer
	opts.TotalSamples = int64(len(samples))
	enc, err := New(format, &b, sampleRate, opts)
	if err != nil {
		return nil, err
	}
	err = enc.Write(samples)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if f, ok := enc.(finalHeader); ok && err == nil {
		copy(b.Bytes(), f.finalHeader())
	}
	return b.Bytes(), err
}

// finalHeader is an Encoder whose output starts with room for a header
// that only Close can complete, as mp3's Info tag, which Whole, holding
// the whole file, puts in.
type finalHeader interface {
	// finalHeader returns the completed header, as long as the room left
	// for it, after a Close that succeeded; nil when there is none.
	finalHeader() []byte
}

// nextRate returns the lowest of rates (ascending) at or above rate, or the
// highest of rates if rate is above them all.
func nextRate(rate int, rates []int) int {
	i, _ := slices.BinarySearch(rates, rate)
	return rates[min(i, len(rates)-1)]
}

// Available reports whether this process can encode format: nil, an
// ErrUnsupported error for a format it does not know, or an ErrUnavailable
// error naming what is missing (ffmpeg, for aac).
func Available(format string) error {
	if _, ok := ContentType(format); !ok {
		return fmt.Errorf("encode: format %q: %w (want one of %v)", format, ErrUnsupported, Formats())
	}
	if format == AAC {
		if _, err := exec.LookPath("ffmpeg"); err != nil {
			return fmt.Errorf("encode: aac needs ffmpeg, which is not on PATH: %w", ErrUnavailable)
		}
	}
	return nil
}
