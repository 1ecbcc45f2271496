package encode

// Raw PCM and WAV: samples as they are, after a header for WAV.

import (
	"fmt"
	"io"

	"github.com/omnistage/omnistage/internal/audio"
)

// pcmEncoder writes raw 16-bit little-endian PCM, after a WAV header when
// header is set.
type pcmEncoder struct {
	w      io.Writer
	format string
	rate   int
	header bool  // write a WAV header before the first samples
	total  int64 // announced length in samples, 0 if unknown
	n      int64 // samples written
	buf    []byte
	err    error
	closed bool
}

var _ Encoder = (*pcmEncoder)(nil)

// pcmBlock is the most samples written to w in one call.
const pcmBlock = 8192

func newPCM(w io.Writer) *pcmEncoder {
	return &pcmEncoder{w: w, format: PCM}
}

func newWAV(w io.Writer, rate int, opts Options) *pcmEncoder {
	e := &pcmEncoder{w: w, format: WAV, rate: rate, header: true, total: opts.TotalSamples}
	// A length a WAV header cannot state is sent as a stream's.
	if 2*e.total > int64(audio.UnknownSize)-audio.WAVHeaderLen {
		e.total = 0
	}
	return e
}

func (e *pcmEncoder) Write(samples []int16) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	if e.total > 0 && e.n+int64(len(samples)) > e.total {
		e.err = lengthError(e.format, e.n+int64(len(samples)), e.total)
		return e.err
	}
	for len(samples) > 0 || e.header {
		e.buf = e.buf[:0]
		if e.header {
			e.buf = e.appendHeader(e.buf)
			e.header = false
		}
		n := min(pcmBlock, len(samples))
		e.buf = audio.AppendPCMBytes(e.buf, samples[:n])
		if _, err := e.w.Write(e.buf); err != nil {
			e.err = fmt.Errorf("encode: %s: %w", e.format, err)
			return e.err
		}
		samples = samples[n:]
		e.n += int64(n)
	}
	return nil
}

func (e *pcmEncoder) appendHeader(dst []byte) []byte {
	size := audio.UnknownSize
	if e.total > 0 {
		size = uint32(2 * e.total)
	}
	return audio.AppendWAVHeader(dst, e.rate, size)
}

func (e *pcmEncoder) Close() error {
	if e.closed {
		return e.err
	}
	if e.err == nil {
		// A stream with no samples still gets its header.
		e.err = e.Write(nil)
	}
	if e.err == nil && e.total > 0 && e.n != e.total {
		e.err = lengthError(e.format, e.n, e.total)
	}
	e.closed = true
	return e.err
}
