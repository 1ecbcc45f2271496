package encode

/*
#cgo pkg-config: flac
#include <stdint.h>
#include <FLAC/stream_encoder.h>

extern int encodeFLACWrite(uintptr_t h, unsigned char *p, size_t n);

static FLAC__StreamEncoderWriteStatus flacWrite(const FLAC__StreamEncoder *enc,
		const FLAC__byte buf[], size_t n, uint32_t samples, uint32_t frame, void *user) {
	if (encodeFLACWrite((uintptr_t)user, (unsigned char *)buf, n) != 0) {
		return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR;
	}
	return FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
}

// flacInit starts a stream that cannot seek back: the STREAMINFO block is
// written once, first.
static FLAC__StreamEncoderInitStatus flacInit(FLAC__StreamEncoder *enc, uintptr_t h) {
	return FLAC__stream_encoder_init_stream(enc, flacWrite, NULL, NULL, NULL, (void *)h);
}
*/
import "C"

import (
	"fmt"
	"io"
	"runtime/cgo"
)

const (
	// flacLevel is libFLAC's compression level, the flac command's default:
	// blocks of 4096 samples, so a block goes out every 256 ms at 16 kHz.
	flacLevel = 5
	// flacBlock is the most samples passed to libFLAC in one call.
	flacBlock = 4096
)

// flacEncoder encodes FLAC with libFLAC's stream encoder. As a stream
// cannot go back to the STREAMINFO block, its MD5 signature and frame sizes
// are 0 (unknown), and so is its sample count unless Options.TotalSamples
// gave it.
type flacEncoder struct {
	sink
	enc     *C.FLAC__StreamEncoder // nil once closed
	handle  cgo.Handle             // e, for the write callback
	started bool                   // the stream is initialized
	total   int64                  // announced length in samples, 0 if unknown
	n       int64                  // samples written
	in      []C.FLAC__int32
	closed  bool
}

var _ Encoder = (*flacEncoder)(nil)

func newFLAC(w io.Writer, rate int, opts Options) (*flacEncoder, error) {
	if C.FLAC__format_sample_rate_is_valid(C.uint32_t(rate)) == 0 {
		return nil, fmt.Errorf("encode: flac: sample rate %d Hz: %w", rate, ErrUnsupported)
	}
	enc := C.FLAC__stream_encoder_new()
	if enc == nil {
		return nil, fmt.Errorf("encode: flac: FLAC__stream_encoder_new failed")
	}
	e := &flacEncoder{sink: sink{w: w, format: FLAC}, enc: enc, total: opts.TotalSamples}
	ok := C.FLAC__stream_encoder_set_channels(enc, 1) != 0 &&
		C.FLAC__stream_encoder_set_bits_per_sample(enc, 16) != 0 &&
		C.FLAC__stream_encoder_set_sample_rate(enc, C.uint32_t(rate)) != 0 &&
		C.FLAC__stream_encoder_set_compression_level(enc, flacLevel) != 0 &&
		C.FLAC__stream_encoder_set_streamable_subset(enc, 1) != 0 &&
		C.FLAC__stream_encoder_set_total_samples_estimate(enc, C.FLAC__uint64(e.total)) != 0
	if !ok {
		C.FLAC__stream_encoder_delete(enc)
		return nil, fmt.Errorf("encode: flac: configuring the encoder failed")
	}
	e.handle = cgo.NewHandle(e)
	return e, nil
}

// start initializes the stream, which writes the "fLaC" marker and the
// STREAMINFO block.
func (e *flacEncoder) start() error {
	e.started = true
	if rc := C.flacInit(e.enc, C.uintptr_t(e.handle)); rc != C.FLAC__STREAM_ENCODER_INIT_STATUS_OK {
		return e.fail("FLAC__stream_encoder_init_stream")
	}
	return nil
}

// fail records the encoder's state after call failed; a failed write
// callback's error wins.
func (e *flacEncoder) fail(call string) error {
	if e.err == nil {
		e.err = fmt.Errorf("encode: flac: %s: %s", call,
			C.GoString(C.FLAC__stream_encoder_get_resolved_state_string(e.enc)))
	}
	return e.err
}

func (e *flacEncoder) Write(samples []int16) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	if e.total > 0 && e.n+int64(len(samples)) > e.total {
		e.err = lengthError(FLAC, e.n+int64(len(samples)), e.total)
		return e.err
	}
	if !e.started {
		if err := e.start(); err != nil {
			return err
		}
	}
	for len(samples) > 0 {
		n := min(flacBlock, len(samples))
		e.in = e.in[:0]
		for _, s := range samples[:n] {
			e.in = append(e.in, C.FLAC__int32(s))
		}
		if C.FLAC__stream_encoder_process_interleaved(e.enc, &e.in[0], C.uint32_t(n)) == 0 {
			return e.fail("FLAC__stream_encoder_process_interleaved")
		}
		samples = samples[n:]
		e.n += int64(n)
	}
	return nil
}

func (e *flacEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err == nil && !e.started {
		e.start()
	}
	if e.err == nil && e.total > 0 && e.n != e.total {
		e.err = lengthError(FLAC, e.n, e.total)
	}
	if e.err == nil && C.FLAC__stream_encoder_finish(e.enc) == 0 {
		e.fail("FLAC__stream_encoder_finish")
	}
	// After an error, delete finishes the stream first, but the write
	// callback refuses to write anything more.
	C.FLAC__stream_encoder_delete(e.enc)
	e.enc = nil
	e.handle.Delete()
	return e.err
}
