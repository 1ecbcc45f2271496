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
	"strings"
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
// Its first frame is an Info tag with LAME's encoder delay, which decoders
// skip (see mp3StreamTag): LAME reserves the frame at the start of its
// output, and the encoder writes the streamed tag in its place, as a
// stream cannot go back to fill in LAME's final tag; Close readies that
// one too, for finalHeader.
type mp3Encoder struct {
	w      io.Writer
	lame   *C.lame_global_flags // nil once closed
	out    []byte               // LAME's output buffer
	tag    []byte               // the streamed tag; nil when LAME writes none
	sent   int64                // bytes of LAME's output passed on
	final  []byte               // LAME's final tag, after Close
	err    error
	closed bool
}

var (
	_ Encoder     = (*mp3Encoder)(nil)
	_ finalHeader = (*mp3Encoder)(nil)
)

// lameVersion is LAME's short version string, as its tags give it.
var lameVersion = strings.TrimSpace(C.GoString(C.get_lame_very_short_version()))

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
	C.lame_set_bWriteVbrTag(lame, 1)
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
		lowpass: int(C.lame_get_lowpassfreq(lame)),
		encoder: lameVersion,
	}
	p.tagBytes = mp3TagBytes(p.outRate, p.kbps)
	return lame, p, nil
}

func newMP3(w io.Writer, rate int, opts Options) (*mp3Encoder, error) {
	lame, p, err := newLAME(rate, opts)
	if err != nil {
		return nil, err
	}
	tag, err := mp3StreamTag(p)
	if err != nil {
		C.lame_close(lame)
		return nil, err
	}
	// LAME's worst case: 1.25 bytes per sample plus 7200.
	return &mp3Encoder{w: w, lame: lame, tag: tag, out: make([]byte, mp3Block*5/4+7200)}, nil
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

// emit writes the rc bytes LAME put in e.out, the streamed tag in place of
// the frame LAME reserved for its own, or records LAME's error.
func (e *mp3Encoder) emit(rc C.int, call string) error {
	if rc < 0 {
		e.err = fmt.Errorf("encode: mp3: %s returned %d", call, rc)
		return e.err
	}
	if rc == 0 {
		return nil
	}
	b := e.out[:rc]
	if e.sent < int64(len(e.tag)) {
		if err := e.replaceReserved(b); err != nil {
			e.err = err
			return err
		}
	}
	e.sent += int64(rc)
	if _, err := e.w.Write(b); err != nil {
		e.err = fmt.Errorf("encode: mp3: %w", err)
	}
	return e.err
}

// replaceReserved writes the streamed tag over the part of the frame LAME
// reserved for its tag that b, the output at e.sent, holds. The reserved
// frame is the tag's header and zeros: anything else means that LAME
// chose other parameters than the tag's.
func (e *mp3Encoder) replaceReserved(b []byte) error {
	for i := range min(int64(len(b)), int64(len(e.tag))-e.sent) {
		want := byte(0)
		if j := e.sent + i; j < 4 {
			want = e.tag[j]
		}
		if b[i] != want {
			return fmt.Errorf("encode: mp3: byte %d of LAME's reserved tag frame is %#x, want %#x", e.sent+i, b[i], want)
		}
	}
	copy(b, e.tag[e.sent:])
	return nil
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
		case int(n) != len(e.tag):
			e.err = fmt.Errorf("encode: mp3: LAME's tag frame has %d bytes, want %d", n, len(e.tag))
		case n > 0:
			e.final = bytes.Clone(e.out[:n])
		}
	}
	C.lame_close(e.lame)
	e.lame = nil
	return e.err
}

// finalHeader returns LAME's tag with the stream's exact length, frame
// count and padding, to replace the start of a whole file (nil without a
// tag, or before a Close that succeeded).
func (e *mp3Encoder) finalHeader() []byte { return e.final }
