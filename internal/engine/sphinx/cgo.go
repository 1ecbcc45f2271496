package sphinx

// The decoder: PocketSphinx through cgo (csphinx.c), one job at a time.

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <malloc.h>
#include <stdlib.h>
#include "csphinx.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
)

// frameMs is the decoder's frame period in milliseconds.
const frameMs = 10

// decoderRate is the only sample rate the acoustic model reads.
const decoderRate = 16000

var (
	quietOnce sync.Once
	// createMu serializes decoder creation: concurrent ps_init calls share
	// sphinx's process-wide logging and configuration state.
	createMu sync.Mutex
)

// decoder is one PocketSphinx decoder. It is not safe for concurrent use:
// the pool hands it to one job at a time.
type decoder struct {
	ps *C.ps_decoder_t
	// added counts the words this decoder added to its dictionary.
	added int
	// hasGrammar is true while a transcript's grammar is set.
	hasGrammar bool
	// broken is set when a C call failed in a way that may leave the
	// decoder in an unknown state; the pool then frees it.
	broken bool
	// newStream makes every decode start a new stream, so that no
	// estimate of the front end carries over from the utterance before.
	newStream bool
	// prior is the cepstral mean a stream's running mean starts from: the
	// model's own (-cmninit), read when the decoder was created.
	prior []C.float
	// streaming is true between startStream and endStream.
	streaming bool
	// job is the ctx of the job the pool gave the decoder to (nil: none),
	// whose turns on the CPU its decodes take (engine.Turn).
	job context.Context
}

// turn waits for the turn of the job's request to decode, or for the job's
// end (its error, which leaves the decoder sound).
func (d *decoder) turn() (engine.CPUTurn, error) {
	if d.job == nil {
		return engine.Turn(context.Background())
	}
	return engine.Turn(d.job)
}

// newDecoder creates a decoder with the acoustic model in hmm and the
// pronunciation dictionary dict. Its every decode starts from the same
// state: the same audio gives the same segments whatever it decoded
// before.
func newDecoder(hmm, dict string) (*decoder, error) {
	quietOnce.Do(func() { C.omni_ps_quiet() })
	ch, cd := C.CString(hmm), C.CString(dict)
	defer C.free(unsafe.Pointer(ch))
	defer C.free(unsafe.Pointer(cd))
	createMu.Lock()
	ps := C.omni_ps_new(ch, cd)
	createMu.Unlock()
	if ps == nil {
		return nil, fmt.Errorf("decoder: cannot load model %s with dictionary %s", hmm, dict)
	}
	prior := make([]C.float, int(C.omni_ps_cmn_len(ps)))
	C.omni_ps_cmn_get(ps, &prior[0])
	return &decoder{ps: ps, newStream: true, prior: prior}, nil
}

// newLMDecoder creates a decoder for free recognition with the acoustic
// model in hmm, the n-gram language model lm and the pronunciation
// dictionary dict.
func newLMDecoder(hmm, lm, dict string) (*decoder, error) {
	quietOnce.Do(func() { C.omni_ps_quiet() })
	ch, cl, cd := C.CString(hmm), C.CString(lm), C.CString(dict)
	defer C.free(unsafe.Pointer(ch))
	defer C.free(unsafe.Pointer(cl))
	defer C.free(unsafe.Pointer(cd))
	createMu.Lock()
	ps := C.omni_ps_new_lm(ch, cl, cd)
	createMu.Unlock()
	if ps == nil {
		return nil, fmt.Errorf("decoder: cannot load model %s with language model %s and dictionary %s", hmm, lm, dict)
	}
	return &decoder{ps: ps}, nil
}

// free releases the decoder.
func (d *decoder) free() {
	if d.ps != nil {
		C.ps_free(d.ps)
		d.ps = nil
	}
}

// has reports whether word is in the dictionary.
func (d *decoder) has(word string) bool {
	cw := C.CString(word)
	defer C.free(unsafe.Pointer(cw))
	return C.omni_ps_has_word(d.ps, cw) != 0
}

// addWord adds word with phones (space-separated ARPAbet) to the
// dictionary.
func (d *decoder) addWord(word, phones string) error {
	cw, cp := C.CString(word), C.CString(phones)
	defer C.free(unsafe.Pointer(cw))
	defer C.free(unsafe.Pointer(cp))
	if C.ps_add_word(d.ps, cw, cp, 0) < 0 {
		return fmt.Errorf("decoder: cannot add %q /%s/ to the dictionary", word, phones)
	}
	d.added++
	return nil
}

// pron returns word's pronunciation in the dictionary (phones separated
// by spaces), "" when it has none.
func (d *decoder) pron(word string) string {
	cw := C.CString(word)
	defer C.free(unsafe.Pointer(cw))
	p := C.omni_ps_pron(d.ps, cw)
	if p == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p)
}

// setWords makes the linear grammar of keys (dictionary entries) the
// active search, with the probe word (a dictionary entry too) after the
// first word unless probe is "" (see omni_ps_set_words).
func (d *decoder) setWords(keys []string, probe string) error {
	cs := make([]*C.char, len(keys))
	for i, k := range keys {
		cs[i] = C.CString(k)
	}
	var cp *C.char
	if probe != "" {
		cp = C.CString(probe)
		defer C.free(unsafe.Pointer(cp))
	}
	defer func() {
		for _, c := range cs {
			C.free(unsafe.Pointer(c))
		}
	}()
	// cs lives in Go memory but holds only C pointers, so cgo may pass it.
	rc := C.omni_ps_set_words(d.ps, &cs[0], C.int(len(cs)), cp)
	d.hasGrammar = true
	if rc != 0 {
		return errors.New("decoder: cannot set the transcript grammar")
	}
	return nil
}

// decode decodes 16 kHz samples as one utterance with the grammar set
// last.
//
// The samples go to sphinx in one call, as a whole utterance: only then
// does it normalize the cepstra by the utterance's own mean (the model's
// batch CMN). Fed in blocks as they arrive, it switches for good to a
// running mean carried over from earlier utterances, which made silences
// unrecognizable, shifted every frame index and made the result depend on
// the requests before.
//
// With d.newStream, the utterance is also a stream of its own: the noise
// level that -remove_noise subtracts is estimated afresh from this audio
// (see the package doc).
func (d *decoder) decode(samples []int16) error {
	if len(samples) == 0 {
		return errors.New("decoder: no audio")
	}
	newStream := C.int(0)
	if d.newStream {
		newStream = 1
	}
	turn, err := d.turn()
	if err != nil {
		return err
	}
	defer turn.End()
	if C.omni_ps_decode(d.ps, (*C.int16)(unsafe.Pointer(&samples[0])), C.size_t(len(samples)), newStream) != 0 {
		d.broken = true
		return errors.New("decoder: cannot decode the utterance")
	}
	return nil
}

// startStream starts an utterance that feed decodes block by block, with
// the grammar set last. Its cepstra are normalized by a running mean that
// starts from the model's prior, not by the utterance's own mean (batch
// CMN needs the whole utterance), and the feature buffer starts where a
// new decoder's does: whatever the decoder decoded before, the same
// blocks give the same segments.
func (d *decoder) startStream() error {
	if C.omni_ps_stream_start(d.ps, &d.prior[0]) != 0 {
		d.broken = true
		return errors.New("decoder: cannot start an utterance")
	}
	d.streaming = true
	return nil
}

// feed decodes the next samples of the utterance startStream started;
// segments then returns the best hypothesis so far. The result depends
// on how the audio is cut into calls: callers cut it the same way for the
// same audio.
func (d *decoder) feed(samples []int16) error {
	if len(samples) == 0 {
		return nil
	}
	turn, err := d.turn()
	if err != nil {
		return err
	}
	defer turn.End()
	if C.omni_ps_stream_feed(d.ps, (*C.int16)(unsafe.Pointer(&samples[0])), C.size_t(len(samples))) != 0 {
		d.broken = true
		return errors.New("decoder: cannot decode a block")
	}
	return nil
}

// endStream ends the utterance startStream started; segments then
// returns its final hypothesis.
func (d *decoder) endStream() error {
	d.streaming = false
	turn, err := d.turn()
	if err != nil {
		d.broken = true // the utterance is left open
		return err
	}
	defer turn.End()
	if C.omni_ps_stream_end(d.ps) != 0 {
		d.broken = true
		return errors.New("decoder: cannot end the utterance")
	}
	return nil
}

// segment is one word of the decoder's hypothesis with its first and last
// frame (inclusive).
type segment struct {
	word   string
	sf, ef int
}

// segments returns the best hypothesis of the utterance just ended (or,
// while one is fed, so far), and false when there is none (the audio did
// not fit the grammar, or no word has ended yet).
func (d *decoder) segments() ([]segment, bool, error) {
	var s C.omni_segs
	rc := C.omni_ps_segments(d.ps, &s)
	defer C.omni_segs_free(&s)
	switch rc {
	case 0:
	case -1:
		return nil, false, nil
	default:
		return nil, false, errors.New("decoder: out of memory reading the hypothesis")
	}
	n := int(s.n)
	if n == 0 {
		return nil, false, nil
	}
	words := unsafe.Slice(s.words, n)
	sf := unsafe.Slice(s.sf, n)
	ef := unsafe.Slice(s.ef, n)
	out := make([]segment, n)
	for i := range out {
		out[i] = segment{word: C.GoString(words[i]), sf: int(sf[i]), ef: int(ef[i])}
	}
	return out, true, nil
}

// hyp returns the best hypothesis of the utterance just ended, words
// separated by spaces; "" when there is none.
func (d *decoder) hyp() (string, error) {
	h := C.omni_ps_hyp(d.ps)
	if h == nil {
		return "", errors.New("decoder: out of memory reading the hypothesis")
	}
	defer C.free(unsafe.Pointer(h))
	return C.GoString(h), nil
}

// reset ends an utterance left streaming and removes the grammar, so the
// decoder holds no memory for the last job.
func (d *decoder) reset() {
	if d.streaming {
		_ = d.endStream() // a failure marks the decoder broken
	}
	if d.hasGrammar {
		C.omni_ps_clear_words(d.ps)
		d.hasGrammar = false
	}
}

// cHeapBytes returns the bytes the C allocator has handed out and not yet
// had back, for the leak test.
func cHeapBytes() int {
	m := C.mallinfo2()
	return int(m.uordblks + m.hblkhd)
}
