package api

// The output formats of the ElevenLabs API (output_format): their names,
// and an encoder that takes a pipeline's samples, at its rate, to one.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/quote"
)

// elFormat is an ElevenLabs output format: pcm_RATE, ulaw_8000 or
// mp3_RATE_KBPS.
type elFormat struct {
	name    string
	kind    string // encode.PCM, encode.MP3 or "ulaw"
	rate    int
	bitrate int // mp3's, in bit/s
}

// elDefaultStream and elDefaultSpeech are the formats without an
// output_format: the WebSocket's and the HTTP endpoints', as ElevenLabs'.
const (
	elDefaultStream = "mp3_44100_128"
	elDefaultSpeech = "mp3_44100_128"
)

// elFormatNames are the formats served, for the error that lists them.
const elFormatNames = "pcm_8000, pcm_16000, pcm_22050, pcm_24000, pcm_44100, pcm_48000, ulaw_8000, mp3_22050_32, mp3_44100_32, mp3_44100_64, mp3_44100_96, mp3_44100_128, mp3_44100_192"

// parseELFormat checks an output_format.
func parseELFormat(name string) (elFormat, error) {
	bad := httperr.BadRequest("output_format %q is not served: use %s", quote.Short(name), elFormatNames)
	parts := strings.Split(name, "_")
	f := elFormat{name: name}
	switch {
	case len(parts) == 2 && parts[0] == "pcm":
		f.kind = encode.PCM
	case name == "ulaw_8000":
		f.kind = "ulaw"
	case len(parts) == 3 && parts[0] == "mp3":
		f.kind = encode.MP3
		kbps, err := strconv.Atoi(parts[2])
		if err != nil || !strings.Contains(" 32 64 96 128 192 ", " "+parts[2]+" ") {
			return f, bad
		}
		f.bitrate = 1000 * kbps
	default:
		return f, bad
	}
	rate, err := strconv.Atoi(parts[1])
	if err != nil || !strings.Contains(" 8000 16000 22050 24000 44100 48000 ", " "+parts[1]+" ") ||
		f.kind == encode.MP3 && rate != 22050 && rate != 44100 {
		return f, bad
	}
	f.rate = rate
	return f, nil
}

// contentType is the format's Content-Type.
func (f elFormat) contentType() string {
	switch f.kind {
	case encode.MP3:
		return "audio/mpeg"
	case "ulaw":
		return "audio/basic"
	}
	return "audio/pcm"
}

// leadMs is how much later than the samples a player plays them from the
// format's bytes: mp3's streamed encoder delay.
func (f elFormat) leadMs() int {
	if f.kind != encode.MP3 {
		return 0
	}
	return int((encode.Lead(encode.MP3, f.rate, encode.Options{Bitrate: f.bitrate, Stream: true}) + time.Millisecond/2) / time.Millisecond)
}

// elEncoder turns a stream of samples at one rate into a format's bytes:
// resampled to the format's rate in one stream (so the bytes are those of
// the whole audio resampled at once, however it came), then as 16-bit
// PCM, μ-law or a streamed mp3.
type elEncoder struct {
	f   elFormat
	rs  *audio.Resampler
	mp3 encode.Encoder // writes to out
	out []byte
}

// newELEncoder returns an encoder of samples at rate Hz into f.
func newELEncoder(f elFormat, rate int) (*elEncoder, error) {
	rs, err := audio.NewResampler(rate, f.rate)
	if err != nil {
		return nil, fmt.Errorf("resampling to %s: %w", f.name, err)
	}
	e := &elEncoder{f: f, rs: rs}
	if f.kind == encode.MP3 {
		enc, err := encode.New(encode.MP3, &bytesSink{e}, f.rate, encode.Options{Bitrate: f.bitrate, Stream: true})
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", f.name, err)
		}
		e.mp3 = enc
	}
	return e, nil
}

// bytesSink appends what an encoder writes to its elEncoder's output.
type bytesSink struct{ e *elEncoder }

func (b *bytesSink) Write(p []byte) (int, error) {
	b.e.out = append(b.e.out, p...)
	return len(p), nil
}

// write takes samples and returns the bytes ready; they stay valid until
// the next call.
func (e *elEncoder) write(samples []int16) ([]byte, error) {
	e.out = e.out[:0]
	return e.encode(e.rs.Process(samples))
}

// close ends the stream and returns its last bytes.
func (e *elEncoder) close() ([]byte, error) {
	e.out = e.out[:0]
	b, err := e.encode(e.rs.Flush())
	if err != nil || e.mp3 == nil {
		return b, err
	}
	if err := e.mp3.Close(); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", e.f.name, err)
	}
	return e.out, nil
}

// encode encodes resampled samples.
func (e *elEncoder) encode(s []int16) ([]byte, error) {
	switch e.f.kind {
	case encode.MP3:
		if err := e.mp3.Write(s); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", e.f.name, err)
		}
	case "ulaw":
		for _, v := range s {
			e.out = append(e.out, ulaw(v))
		}
	default:
		e.out = audio.AppendPCMBytes(e.out, s)
	}
	return e.out, nil
}

// free frees the mp3 encoder of a stream that did not end.
func (e *elEncoder) free() {
	if e != nil && e.mp3 != nil {
		_ = e.mp3.Close()
	}
}

// ulaw encodes a sample in G.711 μ-law.
func ulaw(s int16) byte {
	const bias, clip = 0x84, 32635
	v := int(s)
	sign := 0
	if v < 0 {
		v, sign = -v, 0x80
	}
	v = min(v, clip) + bias
	exp := 7
	for mask := 0x4000; v&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	mant := (v >> (exp + 3)) & 0x0f
	return ^byte(sign | exp<<4 | mant)
}
