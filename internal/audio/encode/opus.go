package encode

/*
#cgo pkg-config: libopusenc opus
#include <stdint.h>
#include <stdlib.h>
#include <opusenc.h>

extern int encodeOpusWrite(uintptr_t h, unsigned char *p, int32_t n);

static int opusWrite(void *user, const unsigned char *p, opus_int32 n) {
	return encodeOpusWrite((uintptr_t)user, (unsigned char *)p, n);
}

static int opusClose(void *user) { return 0; }

static OggOpusEnc *opusCreate(uintptr_t h, OggOpusComments *c, opus_int32 rate, int *err) {
	OpusEncCallbacks cb = {opusWrite, opusClose};
	return ope_encoder_create_callbacks(&cb, (void *)h, c, rate, 1, 0, err);
}

// opusCtl is ope_encoder_ctl for the requests that take one int, which cgo
// cannot call as it is variadic.
static int opusCtl(OggOpusEnc *e, int request, opus_int32 v) {
	return ope_encoder_ctl(e, request, v);
}
*/
import "C"

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/cgo"
	"unsafe"
)

const (
	// opusPageMs is the most audio an Ogg page holds, in milliseconds: a
	// page (27 bytes plus one per packet) goes out at least this often.
	// libopusenc's default is a second, too long for a live stream; 100 ms
	// costs about 8% at 32 kbit/s.
	opusPageMs = 100
	// opusBlockMs is the size of the blocks libopusenc is fed, see
	// opusEncoder.pending.
	opusBlockMs = 20
	// opusEncoderTag is the ENCODER comment, naming the application; the
	// vendor string, which libopusenc sets, names libopus and libopusenc.
	opusEncoderTag = "omnistage"
)

// opusEncoder encodes Ogg Opus with libopusenc, which resamples any input
// rate to Opus's 48 kHz.
type opusEncoder struct {
	sink
	enc    *C.OggOpusEnc // nil once closed
	handle cgo.Handle    // e, for the write callback
	// pending holds the input not yet passed to libopusenc, less than a
	// block. The encoder analyses all the audio it has buffered when it
	// encodes a frame, so its output depends on the sizes of the writes;
	// feeding it fixed blocks makes the output depend on the samples only.
	pending []int16
	block   int
	started bool // a write has reached libopusenc
	closed  bool
}

var _ Encoder = (*opusEncoder)(nil)

func newOpus(w io.Writer, rate int, opts Options) (*opusEncoder, error) {
	block := max(1, rate*opusBlockMs/1000)
	e := &opusEncoder{sink: sink{w: w, format: Opus}, block: block, pending: make([]int16, 0, block)}
	comments := C.ope_comments_create()
	if comments == nil {
		return nil, fmt.Errorf("encode: opus: ope_comments_create failed")
	}
	defer C.ope_comments_destroy(comments) // the encoder keeps a copy
	tag, val := C.CString("ENCODER"), C.CString(opusEncoderTag)
	C.ope_comments_add(comments, tag, val)
	C.free(unsafe.Pointer(tag))
	C.free(unsafe.Pointer(val))

	e.handle = cgo.NewHandle(e)
	var rc C.int
	e.enc = C.opusCreate(C.uintptr_t(e.handle), comments, C.opus_int32(rate), &rc)
	if e.enc == nil {
		e.handle.Delete()
		return nil, fmt.Errorf("encode: opus: %d Hz: %s: %w", rate, C.GoString(C.ope_strerror(rc)), ErrUnsupported)
	}
	serial := opts.OggSerial
	if serial == 0 {
		serial = rand.Uint32()
	}
	for _, c := range []struct {
		name    string
		request C.int
		value   int
	}{
		{"bitrate", C.OPUS_SET_BITRATE_REQUEST, opts.Bitrate},
		// libopusenc 0.2.1 (Debian 12) reads the frame size request
		// uninitialized when draining unless it is set.
		{"frame duration", C.OPUS_SET_EXPERT_FRAME_DURATION_REQUEST, C.OPUS_FRAMESIZE_20_MS},
		// No look-ahead beyond what fills a frame, rather than 2 s of
		// it for libopus's speech/music analysis: a stream cannot wait
		// 2 s, and the analysis still tells speech (flite's is coded
		// exactly as with OPUS_SIGNAL_VOICE forced).
		{"decision delay", C.OPE_SET_DECISION_DELAY_REQUEST, 0},
		{"muxing delay", C.OPE_SET_MUXING_DELAY_REQUEST, 48 * opusPageMs},
		{"serial", C.OPE_SET_SERIALNO_REQUEST, int(int32(serial))},
	} {
		if rc := C.opusCtl(e.enc, c.request, C.opus_int32(c.value)); rc != C.OPE_OK {
			e.free()
			return nil, fmt.Errorf("encode: opus: setting %s to %d: %s: %w",
				c.name, c.value, C.GoString(C.ope_strerror(rc)), ErrUnsupported)
		}
	}
	return e, nil
}

func (e *opusEncoder) Write(samples []int16) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	if len(e.pending) > 0 {
		n := min(e.block-len(e.pending), len(samples))
		e.pending = append(e.pending, samples[:n]...)
		samples = samples[n:]
		if len(e.pending) < e.block {
			return nil
		}
		if err := e.encode(e.pending); err != nil {
			return err
		}
		e.pending = e.pending[:0]
	}
	for len(samples) >= e.block {
		if err := e.encode(samples[:e.block]); err != nil {
			return err
		}
		samples = samples[e.block:]
	}
	e.pending = append(e.pending, samples...)
	return nil
}

// encode passes samples to libopusenc, which calls encodeOpusWrite for the
// pages it completes.
func (e *opusEncoder) encode(samples []int16) error {
	e.started = true
	var p *C.opus_int16 // libopusenc reads no sample of an empty write
	if len(samples) > 0 {
		p = (*C.opus_int16)(unsafe.Pointer(&samples[0]))
	}
	rc := C.ope_encoder_write(e.enc, p, C.int(len(samples)))
	return e.check(rc, "ope_encoder_write")
}

// check records a libopusenc error; a failed write callback's error wins.
func (e *opusEncoder) check(rc C.int, call string) error {
	if e.err == nil && rc != C.OPE_OK {
		e.err = fmt.Errorf("encode: opus: %s: %s", call, C.GoString(C.ope_strerror(rc)))
	}
	return e.err
}

func (e *opusEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err == nil && (len(e.pending) > 0 || !e.started) {
		// With no audio at all, an empty write still starts the stream:
		// libopusenc 0.2.1 fails an assertion, aborting the process, if
		// it drains a stream that was never started.
		e.encode(e.pending)
	}
	if e.err == nil {
		e.check(C.ope_encoder_drain(e.enc), "ope_encoder_drain")
	}
	e.free()
	return e.err
}

// free releases the C encoder and the handle.
func (e *opusEncoder) free() {
	C.ope_encoder_destroy(e.enc)
	e.enc = nil
	e.handle.Delete()
}
