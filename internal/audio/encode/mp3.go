package encode

/*
#cgo LDFLAGS: -lmp3lame -lm
#include <stdlib.h>
#include <lame/lame.h>
*/
import "C"

import (
	"fmt"
	"io"
	"unsafe"
)

// mp3Rates are the sample rates MPEG-1, -2 and -2.5 Layer III can carry.
var mp3Rates = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}

// mp3Quality is LAME's algorithm quality, 0 (best, slowest) to 9: 3 is
// LAME 3.100's default, set so that a library with another default does
// not change the output.
const mp3Quality = 3

// mp3Block is the most samples passed to LAME in one call; it bounds the
// output buffer.
const mp3Block = 8192

// mp3Encoder encodes constant-bit-rate MP3 with LAME, without a Xing/Info
// tag, which a stream cannot go back to fill in, and without ID3 tags.
type mp3Encoder struct {
	w      io.Writer
	lame   *C.lame_global_flags // nil once closed
	out    []byte               // LAME's output buffer
	err    error
	closed bool
}

var _ Encoder = (*mp3Encoder)(nil)

func newMP3(w io.Writer, rate int, opts Options) (*mp3Encoder, error) {
	lame := C.lame_init()
	if lame == nil {
		return nil, fmt.Errorf("encode: mp3: lame_init failed")
	}
	C.lame_set_in_samplerate(lame, C.int(rate))
	C.lame_set_out_samplerate(lame, C.int(nextRate(rate, mp3Rates)))
	C.lame_set_num_channels(lame, 1)
	C.lame_set_mode(lame, C.MONO)
	C.lame_set_VBR(lame, C.vbr_off)
	C.lame_set_brate(lame, C.int(opts.Bitrate/1000))
	C.lame_set_quality(lame, mp3Quality)
	C.lame_set_bWriteVbrTag(lame, 0)
	C.lame_set_write_id3tag_automatic(lame, 0)
	if rc := C.lame_init_params(lame); rc < 0 {
		C.lame_close(lame)
		return nil, fmt.Errorf("encode: mp3: %d Hz at %d bit/s: lame_init_params returned %d: %w",
			rate, opts.Bitrate, rc, ErrUnsupported)
	}
	// LAME's worst case: 1.25 bytes per sample plus 7200.
	return &mp3Encoder{w: w, lame: lame, out: make([]byte, mp3Block*5/4+7200)}, nil
}

func (e *mp3Encoder) Write(samples []int16) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return errClosed
	}
	for len(samples) > 0 {
		n := min(mp3Block, len(samples))
		rc := C.lame_encode_buffer(e.lame, (*C.short)(unsafe.Pointer(&samples[0])), nil, C.int(n),
			(*C.uchar)(unsafe.Pointer(&e.out[0])), C.int(len(e.out)))
		if err := e.emit(rc, "lame_encode_buffer"); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

// emit writes the rc bytes LAME put in e.out, or records LAME's error.
func (e *mp3Encoder) emit(rc C.int, call string) error {
	if rc < 0 {
		e.err = fmt.Errorf("encode: mp3: %s returned %d", call, rc)
		return e.err
	}
	if rc == 0 {
		return nil
	}
	if _, err := e.w.Write(e.out[:rc]); err != nil {
		e.err = fmt.Errorf("encode: mp3: %w", err)
	}
	return e.err
}

func (e *mp3Encoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if e.err == nil {
		rc := C.lame_encode_flush(e.lame, (*C.uchar)(unsafe.Pointer(&e.out[0])), C.int(len(e.out)))
		e.emit(rc, "lame_encode_flush")
	}
	C.lame_close(e.lame)
	e.lame = nil
	return e.err
}
