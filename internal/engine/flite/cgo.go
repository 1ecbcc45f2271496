package flite

/*
#cgo LDFLAGS: -lflite_cmu_us_slt -lflite_cmu_us_rms -lflite_cmu_us_awb -lflite_cmu_us_kal16 -lflite_usenglish -lflite_cmulex -lflite -lm
#include <stdlib.h>
#include "cflite.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
)

// voice describes one registered flite voice.
type voice struct {
	name string
	id   C.int
	// kind is what the talker produces with this voice: frames or segments.
	kind engine.Kind
	// Filled by initFlite.
	frameShift float32
	durStretch float32
	channels   int // frame parameters per frame (clustergen)
	strChans   int // excitation strengths per frame (clustergen)
	phones     map[string]bool
	// frameSamples is how many samples one frame makes and blockSamples
	// the size of a streamed block, the most whole frames that fit in
	// MaxBlockMs (clustergen).
	frameSamples, blockSamples int
}

// voices lists the voices in the order Voices reports them.
var voices = []*voice{
	{name: "slt", id: C.OMNI_SLT, kind: engine.KindFrames},
	{name: "rms", id: C.OMNI_RMS, kind: engine.KindFrames},
	{name: "awb", id: C.OMNI_AWB, kind: engine.KindFrames},
	{name: "kal16", id: C.OMNI_KAL16, kind: engine.KindSegments},
}

// DefaultVoice is the voice used when neither the deploy options nor the
// request name one.
const DefaultVoice = "slt"

// Voices returns the names of the voices this package speaks with.
func Voices() []string {
	names := make([]string, len(voices))
	for i, v := range voices {
		names[i] = v.name
	}
	return names
}

func lookupVoice(name string) (*voice, error) {
	for _, v := range voices {
		if v.name == name {
			return v, nil
		}
	}
	return nil, &engine.InputError{Reason: fmt.Sprintf("unknown voice %q (have %v)", name, Voices())}
}

var (
	initOnce sync.Once
	initErr  error
)

// initFlite calls flite_init and registers the voices exactly once, then
// learns each voice's constants (a clustergen voice's frame layout comes
// from one short probe synthesis).
func initFlite() error {
	initOnce.Do(func() {
		if rc := C.omni_init(); rc != C.OMNI_OK {
			initErr = fmt.Errorf("flite: voice registration failed (code %d)", int(rc))
			return
		}
		for _, v := range voices {
			v.durStretch = float32(C.omni_voice_dur_stretch(v.id))
			var names **C.char
			n := int(C.omni_voice_phones(v.id, &names))
			v.phones = make(map[string]bool, n)
			for _, p := range unsafe.Slice(names, n) {
				v.phones[C.GoString(p)] = true
			}
			if v.kind != engine.KindFrames {
				continue
			}
			v.frameShift = float32(C.omni_voice_frame_shift(v.id))
			v.frameSamples = int(C.omni_cg_frame_samples(v.id, C.float(v.frameShift)))
			v.blockSamples = blockSamples(int(C.omni_voice_sample_rate(v.id)), v.frameSamples)
			f, err := talkFrames(v, "Hello.", 0)
			if err != nil {
				initErr = fmt.Errorf("flite: probe %s: %w", v.name, err)
				return
			}
			v.channels, v.strChans = f.Channels, f.StrChannels
		}
	})
	return initErr
}

// errEmpty means flite found no words to speak in a sentence.
var errEmpty = errors.New("nothing to speak")

// errStopped means a stream's consumer stopped the synthesis.
var errStopped = errors.New("flite: synthesis stopped")

func talkErr(rc C.int) error {
	switch rc {
	case C.OMNI_OK:
		return nil
	case C.OMNI_ERR_EMPTY:
		return errEmpty
	case C.OMNI_ERR_STOPPED:
		return errStopped
	case C.OMNI_ERR_VOICE:
		return errors.New("flite: wrong voice for this call")
	default:
		return errors.New("flite: synthesis failed")
	}
}

func floatPtr(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

// cAudio copies n samples from C memory into Go memory.
func cAudio(samples *C.short, n, rate C.int) *engine.Audio {
	a := &engine.Audio{SampleRate: int(rate), Samples: make([]int16, int(n))}
	if n > 0 {
		copy(a.Samples, unsafe.Slice((*int16)(unsafe.Pointer(samples)), int(n)))
	}
	return a
}

// takeWave copies a cst_wave's samples into Go memory and deletes it.
func takeWave(w *C.cst_wave) *engine.Audio {
	defer C.delete_wave(w)
	return cAudio(w.samples, w.num_samples, w.sample_rate)
}

// maxSentenceBytes bounds one utterance. flite's text analysis is
// quadratic in an utterance's size (intonation features walk the phrase):
// 150 unpunctuated 64-letter words took 7 s, 20 of them 0.45 s. Real
// sentences are far shorter; a longer run of text is broken before the
// token that crosses the limit, as flite itself breaks after 500 tokens.
const maxSentenceBytes = 1000

// splitSentences returns the utterances flite's own reader would make of
// text (which must already be clean): the voice's tokenizer and its
// utt_break rule, plus maxSentenceBytes. Each sentence is a substring of
// text.
func splitSentences(v *voice, text string) []string {
	cs := C.CString(text)
	defer C.free(unsafe.Pointer(cs))
	spans := make([]C.int, 2*64)
	for {
		n := int(C.omni_split(v.id, cs, maxSentenceBytes, &spans[0], C.int(len(spans)/2)))
		if n < 0 {
			return nil
		}
		if n > len(spans)/2 {
			spans = make([]C.int, 2*n)
			continue
		}
		out := make([]string, 0, n)
		for i := 0; i < n; i++ {
			s, e := int(spans[2*i]), int(spans[2*i+1])
			if s < 0 || e > len(text) || s >= e {
				continue
			}
			out = append(out, text[s:e])
		}
		return out
	}
}

// talkFrames runs a clustergen voice on one sentence and returns its frames.
func talkFrames(v *voice, sentence string, stretch float32) (*engine.Frames, error) {
	cs := C.CString(sentence)
	defer C.free(unsafe.Pointer(cs))
	var t C.omni_talk
	if err := talkErr(C.omni_talk_cg(v.id, cs, C.float(stretch), &t)); err != nil {
		return nil, err
	}
	defer C.omni_talk_free(&t)
	n := int(t.nframes)
	f := &engine.Frames{
		Voice:       v.name,
		Channels:    int(t.nch),
		Params:      make([]float32, n*int(t.nch)),
		StrChannels: int(t.nstr),
		Str:         make([]float32, n*int(t.nstr)),
		FrameShift:  v.frameShift,
	}
	C.omni_talk_frames(&t, floatPtr(f.Params), floatPtr(f.Str))
	return f, nil
}

// talkSegments runs a diphone voice on one sentence and returns its
// segments and pitch targets.
func talkSegments(v *voice, sentence string, stretch float32) (*engine.Segments, error) {
	cs := C.CString(sentence)
	defer C.free(unsafe.Pointer(cs))
	var t C.omni_talk
	if err := talkErr(C.omni_talk_diphone(v.id, cs, C.float(stretch), &t)); err != nil {
		return nil, err
	}
	defer C.omni_talk_free(&t)
	nseg, ntgt := int(t.nseg), int(t.ntgt)
	names := make([]byte, int(t.namebytes))
	cluster := make([]byte, nseg)
	s := &engine.Segments{
		Voice:     v.name,
		Names:     make([]string, 0, nseg),
		Ends:      make([]float32, nseg),
		Cluster:   make([]bool, nseg),
		TargetPos: make([]float32, ntgt),
		TargetF0:  make([]float32, ntgt),
	}
	C.omni_talk_segments(&t, (*C.char)(unsafe.Pointer(&names[0])), floatPtr(s.Ends),
		(*C.uchar)(unsafe.Pointer(&cluster[0])), floatPtr(s.TargetPos), floatPtr(s.TargetF0))
	for start, i := 0, 0; i < len(names); i++ {
		if names[i] == 0 {
			s.Names = append(s.Names, string(names[start:i]))
			start = i + 1
		}
	}
	for i, c := range cluster {
		s.Cluster[i] = c != 0
	}
	return s, nil
}

// vocodeFrames turns validated frames into audio. With s nil it returns
// the whole wave from one call, the way flite vocodes (tests compare the
// stream with it). Otherwise flite hands s each block of v.blockSamples
// samples (the last one shorter) as soon as it is final, through
// omniStreamBlock on this goroutine, and vocodeFrames returns no audio;
// when s asks to stop, the synthesis stops there and the error is
// errStopped.
func vocodeFrames(v *voice, f *engine.Frames, seed uint32, s *blockStream) (*engine.Audio, error) {
	var h cgo.Handle // 0: no stream
	if s != nil {
		h = cgo.NewHandle(s)
		defer h.Delete()
	}
	var w *C.cst_wave
	// flite calls back once more than min_buffsize new samples are final,
	// and they grow a frame at a time, so blockSamples-1 makes blocks of
	// exactly blockSamples (a whole number of frames).
	rc := C.omni_vocode_cg(v.id, floatPtr(f.Params), C.int(f.Len()), C.int(f.Channels),
		floatPtr(f.Str), C.int(f.StrChannels), C.float(f.FrameShift), C.uint(seed),
		C.int(v.blockSamples-1), C.uintptr_t(h), &w)
	if err := talkErr(rc); err != nil || s != nil {
		return nil, err
	}
	return takeWave(w), nil
}

// omniStreamBlock is flite's streaming callback (through cflite.c's
// stream_block): n final samples for the blockStream behind handle h. It
// runs on the synthesis's thread, in the middle of it, and never waits
// for the consumer; it may wait for the CPU, when it yields its turn to a
// request due first (the thread, and its rand() sequence, stay the
// synthesis's).
//
//export omniStreamBlock
func omniStreamBlock(h C.uintptr_t, samples *C.short, n, rate C.int) C.int {
	s := cgo.Handle(h).Value().(*blockStream)
	if !s.live() || !s.put(cAudio(samples, n, rate)) || !s.next() {
		return C.CST_AUDIO_STREAM_STOP
	}
	return C.CST_AUDIO_STREAM_CONT
}

// vocodeSegments turns validated segments into audio.
func vocodeSegments(v *voice, s *engine.Segments, seed uint32) (*engine.Audio, error) {
	var names []byte
	for _, n := range s.Names {
		names = append(names, n...)
		names = append(names, 0)
	}
	cluster := make([]byte, len(s.Cluster))
	for i, c := range s.Cluster {
		if c {
			cluster[i] = 1
		}
	}
	var w *C.cst_wave
	rc := C.omni_vocode_diphone(v.id, (*C.char)(unsafe.Pointer(&names[0])), floatPtr(s.Ends),
		(*C.uchar)(unsafe.Pointer(&cluster[0])), C.int(len(s.Names)),
		floatPtr(s.TargetPos), floatPtr(s.TargetF0), C.int(len(s.TargetPos)), C.uint(seed), &w)
	if err := talkErr(rc); err != nil {
		return nil, err
	}
	return takeWave(w), nil
}

// utterance is a synthesized (or analyzed) flite utterance.
type utterance struct{ u *C.cst_utterance }

// synthText synthesizes clean text as a single utterance, the way
// flite_text_to_wave does, after srand(seed). With waveOff the wave
// synthesis is skipped (text analysis only). The caller frees the result.
func synthText(v *voice, text string, seed uint32, waveOff bool) (utterance, error) {
	cs := C.CString(text)
	defer C.free(unsafe.Pointer(cs))
	off := C.int(0)
	if waveOff {
		off = 1
	}
	var u *C.cst_utterance
	rc := C.omni_synth_text(v.id, cs, C.uint(seed), off, &u)
	if err := talkErr(rc); err != nil {
		return utterance{}, err
	}
	return utterance{u}, nil
}

func (u utterance) free() { C.delete_utterance(u.u) }

// audio copies the utterance's wave.
func (u utterance) audio() (*engine.Audio, error) {
	w := C.omni_utt_wave(u.u)
	if w == nil {
		return nil, errors.New("flite: utterance has no wave")
	}
	return takeWave(C.copy_wave(w)), nil
}

// uttWord is one word of an utterance with its phones and its times in
// seconds (negative when flite has no segment to time it by).
type uttWord struct {
	name       string
	start, end float32
	phones     []string
	// token is the name of the token the word was made from, and tokenID
	// its number in the utterance (-1 when the word has none): words of
	// one token ("$100": "one", "hundred", "dollars") share it.
	token   string
	tokenID int
}

func (u utterance) words() []uttWord {
	var nw, np C.int
	C.omni_utt_counts(u.u, &nw, &np)
	if nw == 0 {
		return nil
	}
	names := make([]*C.char, int(nw))
	start := make([]float32, int(nw))
	end := make([]float32, int(nw))
	nph := make([]C.int, int(nw))
	phones := make([]*C.char, int(np)+1)
	tokens := make([]*C.char, int(nw))
	tokid := make([]C.int, int(nw))
	C.omni_utt_words(u.u, &names[0], floatPtr(start), floatPtr(end), &nph[0], &phones[0], &tokens[0], &tokid[0])
	out := make([]uttWord, int(nw))
	k := 0
	for i := range out {
		out[i] = uttWord{name: C.GoString(names[i]), start: start[i], end: end[i], tokenID: int(tokid[i])}
		if tokens[i] != nil {
			out[i].token = C.GoString(tokens[i])
		}
		for j := 0; j < int(nph[i]); j, k = j+1, k+1 {
			out[i].phones = append(out[i].phones, C.GoString(phones[k]))
		}
	}
	return out
}

// referenceWave is flite_text_to_wave after srand(seed), with no guard: for
// tests that compare the engines against flite's one-call path.
func referenceWave(v *voice, text string, seed uint32) *engine.Audio {
	cs := C.CString(text)
	defer C.free(unsafe.Pointer(cs))
	w := C.omni_reference_wave(v.id, cs, C.uint(seed))
	if w == nil {
		return nil
	}
	return takeWave(w)
}

// cHeapInUse is the C heap in use (malloc'ed and not freed), for leak tests.
func cHeapInUse() int64 { return int64(C.omni_heap_inuse()) }
