package encode

/*
#cgo LDFLAGS: -lmp3lame -lm
#include <stdlib.h>
#include <lame/lame.h>
*/
import "C"

import (
	"bytes"
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

// mp3Encoder encodes constant-bit-rate MP3 with LAME, without ID3 tags.
// A file (without Options.Stream) starts with the frame LAME reserves for
// its Info tag, which states the encoder delay and the stream's length:
// Close readies LAME's tag, and Whole, which holds the file, puts it in
// that frame (finalHeader). A stream has no tag, as it cannot go back to
// fill one in, and no reserved frame.
type mp3Encoder struct {
	w        io.Writer
	lame     *C.lame_global_flags // nil once closed
	out      []byte               // LAME's output buffer
	tagBytes int                  // the size of the reserved tag frame; 0 in a stream
	final    []byte               // LAME's tag, after Close
	err      error
	closed   bool
}

var (
	_ Encoder     = (*mp3Encoder)(nil)
	_ finalHeader = (*mp3Encoder)(nil)
)

// newLAME returns LAME set up for mono input at rate Hz with opts, and the
// parameters it chose. The caller closes it.
func newLAME(rate int, opts Options) (*C.lame_global_flags, mp3Params, error) {
	lame := C.lame_init()
	if lame == nil {
		return nil, mp3Params{}, fmt.Errorf("encode: mp3: lame_init failed")
	}
	C.lame_set_in_samplerate(lame, C.int(rate))
	C.lame_set_out_samplerate(lame, C.int(nextRate(rate, mp3Rates)))
	C.lame_set_num_channels(lame, 1)
	C.lame_set_mode(lame, C.MONO)
	C.lame_set_VBR(lame, C.vbr_off)
	C.lame_set_brate(lame, C.int(opts.Bitrate/1000))
	C.lame_set_quality(lame, mp3Quality)
	writeTag := C.int(1)
	if opts.Stream {
		writeTag = 0
	}
	C.lame_set_bWriteVbrTag(lame, writeTag)
	C.lame_set_write_id3tag_automatic(lame, 0)
	if rc := C.lame_init_params(lame); rc < 0 {
		C.lame_close(lame)
		return nil, mp3Params{}, fmt.Errorf("encode: mp3: %d Hz at %d bit/s: lame_init_params returned %d: %w",
			rate, opts.Bitrate, rc, ErrUnsupported)
	}
	p := mp3Params{
		outRate: int(C.lame_get_out_samplerate(lame)),
		kbps:    int(C.lame_get_brate(lame)),
		delay:   int(C.lame_get_encoder_delay(lame)),
	}
	p.tagBytes = mp3TagBytes(p.outRate, p.kbps)
	return lame, p, nil
}

func newMP3(w io.Writer, rate int, opts Options) (*mp3Encoder, error) {
	lame, p, err := newLAME(rate, opts)
	if err != nil {
		return nil, err
	}
	// LAME's worst case: 1.25 bytes per sample plus 7200.
	e := &mp3Encoder{w: w, lame: lame, out: make([]byte, mp3Block*5/4+7200)}
	if !opts.Stream {
		e.tagBytes = p.tagBytes
	}
	return e, nil
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
	if e.err == nil {
		// 0 when LAME writes no tag.
		n := C.lame_get_lametag_frame(e.lame, (*C.uchar)(unsafe.Pointer(&e.out[0])), C.size_t(len(e.out)))
		switch {
		case int(n) != e.tagBytes:
			e.err = fmt.Errorf("encode: mp3: LAME's tag frame has %d bytes, want %d", n, e.tagBytes)
		case n > 0:
			e.final = bytes.Clone(e.out[:n])
		}
	}
	C.lame_close(e.lame)
	e.lame = nil
	return e.err
}

// finalHeader returns LAME's tag with the file's exact length, frame
// count, encoder delay and padding, to replace the frame reserved at the
// start of a whole file (nil in a stream, at a bitrate too low for the
// tag, or before a Close that succeeded).
func (e *mp3Encoder) finalHeader() []byte { return e.final }
