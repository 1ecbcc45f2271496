// Package sphinx holds the sphinx-aligner engine: a forced aligner that
// turns speech audio and its transcript into word timestamps with
// PocketSphinx.
//
// The transcript is normalized by flite's own text analysis, exactly as
// the flite talker normalizes it, so the words aligned are the spoken ones
// ("$5" is "five", "dollars"). The alignment is a decode of the audio with
// a grammar that holds exactly those words in order; the decoder inserts
// silences and fillers between them. The timestamps report the input's
// own tokens: "$5" is one entry, its text "$5", its span of the input,
// spoken as "five", "dollars", timed from the first to the last.
//
// # Nothing carries over
//
// The same audio and transcript give the same timestamps on any decoder
// of the pool, whatever it aligned before. Two estimates of this
// PocketSphinx (5prealpha) outlive an utterance: the running cepstral
// mean of live CMN, which the aligner never uses because each utterance
// is fed whole and normalized by its own mean (batch CMN, see
// decoder.decode); and the noise level that -remove_noise subtracts from
// the mel energies, which ps_start_utt keeps and only ps_start_stream
// resets. Carried over, the noise level changed the cepstra (an
// utterance's mean c0 by up to 0.7) and moved a boundary by a frame for
// one (text, previous text) pair in four. So each alignment starts a
// stream of its own, which leaves the accuracy as it was (11.7 ms mean
// boundary error over 1296 words of four voices). Noise subtraction
// itself stays: without it boundaries come a little closer on clean
// speech (11.3 ms) but much farther on noisy speech (65 against 27 ms at
// 20 dB SNR).
package sphinx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
)

// Name is the engine's name in pipeline configs.
const Name = "sphinx-aligner"

// Default model files: Debian's pocketsphinx-en-us.
const (
	DefaultModel = "/usr/share/pocketsphinx/model/en-us/en-us"
	DefaultDict  = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
)

// Limits on one request.
const (
	// MaxAudioSeconds bounds the audio of one request: about as much
	// speech as flite.MaxTextRunes characters of text make.
	MaxAudioSeconds = 900
	// MinSampleRate and MaxSampleRate bound the input rate: audio at any
	// other rate than the model's 16 kHz is resampled to it (speech below
	// 16 kHz lacks some of the band the model was trained on, and aligns
	// less closely), and the timestamps are in the audio's own time.
	MinSampleRate = audio.MinRate
	MaxSampleRate = audio.MaxRate
	// MaxDecoders bounds the decoders option.
	MaxDecoders = 64
)

// Fallbacks: what Process does when the decoder finds no alignment (the
// audio does not fit the transcript, or is too short for it).
const (
	// FallbackSplit spreads the words over the speech (the audio less its
	// leading and trailing silence) in proportion to their phone counts,
	// so that every word still gets a timestamp, if only a rough one.
	FallbackSplit = "split"
	// FallbackError fails the request with an error that wraps
	// ErrNoAlignment and an *engine.InputError.
	FallbackError = "error"
)

// ErrNoAlignment is wrapped by the error Process returns when the decoder
// finds no alignment and the fallback is FallbackError.
var ErrNoAlignment = errors.New("no alignment")

// Options are the engine's deploy options.
type Options struct {
	// Decoders is the most decoders a replica holds, that is how many
	// requests it aligns at once (default: half the CPUs the process may
	// use, GOMAXPROCS, at least one: alignment is about half the CPU of a
	// request with timestamps, and more decoders than that take the cores
	// from the first audio of new requests). Warm makes the first; the
	// others are made when concurrent jobs first need them, about 30 MB and
	// 160 ms each.
	Decoders int `json:"decoders"`
	// Voice is the flite voice whose text analysis normalizes the
	// transcript and pronounces words the dictionary lacks (default
	// flite.DefaultVoice). The US voices share one front end, so any of
	// them fits audio spoken by another.
	Voice string `json:"voice"`
	// Fallback is FallbackSplit (default) or FallbackError.
	Fallback string `json:"fallback"`
	// Model is the acoustic model directory (default DefaultModel).
	Model string `json:"model"`
	// Dict is the pronunciation dictionary (default DefaultDict).
	Dict string `json:"dict"`
}

// Aligner is the sphinx-aligner engine: audio in (16-bit mono, 16 to
// 48 kHz), one timestamps chunk out with one entry per transcript word.
// Its transcript is Job.Prompt.Text.
//
// A replica holds a pool of up to Options.Decoders decoders, made as
// concurrent Process calls need them; calls beyond that wait for a free
// one.
type Aligner struct {
	opts Options
	pool *pool
}

var (
	_ engine.Engine        = (*Aligner)(nil)
	_ engine.ParamsChecker = (*Aligner)(nil)
)

// Register adds the sphinx-aligner driver to r.
func Register(r *engine.Registry) {
	r.Register(Name, engine.Driver{
		Check: func(spec engine.Spec) error {
			_, err := check(spec)
			return wrap(err)
		},
		New: func(spec engine.Spec) (engine.Engine, error) {
			a, err := New(spec)
			if err != nil {
				return nil, err
			}
			return a, nil
		},
	})
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", Name, err)
}

// check validates a stage's kinds and options and returns the options
// with their defaults.
func check(spec engine.Spec) (Options, error) {
	var o Options
	if spec.Input != engine.KindAudio {
		return o, fmt.Errorf("input must be %q, not %q", engine.KindAudio, spec.Input)
	}
	if spec.Output != engine.KindTimestamps {
		return o, fmt.Errorf("output must be %q, not %q", engine.KindTimestamps, spec.Output)
	}
	if err := spec.Options.Decode(&o); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	if o.Decoders == 0 {
		o.Decoders = defaultDecoders()
	}
	if o.Voice == "" {
		o.Voice = flite.DefaultVoice
	}
	if o.Fallback == "" {
		o.Fallback = FallbackSplit
	}
	if o.Model == "" {
		o.Model = DefaultModel
	}
	if o.Dict == "" {
		o.Dict = DefaultDict
	}
	var errs []error
	if o.Decoders < 1 || o.Decoders > MaxDecoders {
		errs = append(errs, fmt.Errorf("options: decoders: %d is outside [1, %d]", o.Decoders, MaxDecoders))
	}
	known := false
	for _, v := range flite.Voices() {
		known = known || v == o.Voice
	}
	if !known {
		errs = append(errs, fmt.Errorf("options: voice: unknown voice %q (have %v)", o.Voice, flite.Voices()))
	}
	if o.Fallback != FallbackSplit && o.Fallback != FallbackError {
		errs = append(errs, fmt.Errorf("options: fallback: %q is neither %q nor %q", o.Fallback, FallbackSplit, FallbackError))
	}
	// A missing model file would make ps_init fail deep in C; say which.
	for _, f := range []string{"mdef", "means", "variances", "transition_matrices", "feat.params"} {
		if _, err := os.Stat(filepath.Join(o.Model, f)); err != nil {
			errs = append(errs, fmt.Errorf("options: model: %w", err))
			break
		}
	}
	if st, err := os.Stat(o.Dict); err != nil {
		errs = append(errs, fmt.Errorf("options: dict: %w", err))
	} else if st.IsDir() {
		errs = append(errs, fmt.Errorf("options: dict: %s is a directory", o.Dict))
	}
	return o, errors.Join(errs...)
}

// New builds one replica. Its decoders are created by Warm, or on first
// use.
func New(spec engine.Spec) (*Aligner, error) {
	o, err := check(spec)
	if err != nil {
		return nil, wrap(err)
	}
	return &Aligner{opts: o, pool: newPool(o.Decoders, o.Model, o.Dict)}, nil
}

// defaultDecoders is Options.Decoders' default.
func defaultDecoders() int { return min(max(runtime.GOMAXPROCS(0)/2, 1), MaxDecoders) }

// warmText is what Warm aligns.
const warmText = "Hello, this is a warm up."

// Warm creates the pool's first decoder and aligns a short synthesized
// sentence on it: a decoder's first utterance is slower than later ones.
// Its result is the same as later ones' (see "Nothing carries over" in
// the package doc), so a decoder the pool creates later, unwarmed, gives
// the same timestamps as the warmed one. The pool makes its other
// decoders as concurrent jobs need them, so a server's memory grows with
// its timestamped load, not with its cores.
func (a *Aligner) Warm(ctx context.Context) error {
	speech, _, err := flite.SynthesizeTimed(warmText, a.opts.Voice, 0)
	if err != nil {
		return wrap(fmt.Errorf("warm: %w", err))
	}
	words, err := transcript(warmText, a.opts.Voice)
	if err != nil {
		return wrap(fmt.Errorf("warm: %w", err))
	}
	pcm, durMs, err := readAudio(ctx, engine.NewSliceSource(engine.Chunk{Audio: speech}))
	if err != nil {
		return wrap(fmt.Errorf("warm: %w", err))
	}
	d, err := a.pool.get(ctx)
	if err != nil {
		return wrap(fmt.Errorf("warm: %w", err))
	}
	defer a.pool.put(d)
	if _, err := a.alignOn(d, words, pcm, durMs); err != nil {
		return wrap(fmt.Errorf("warm: %w", err))
	}
	return nil
}

// Close frees the decoders.
func (a *Aligner) Close() error {
	a.pool.close()
	return nil
}

// CheckParams implements engine.ParamsChecker: the aligner takes no
// sampling params, so only null or {} is accepted.
func (a *Aligner) CheckParams(params json.RawMessage) error {
	var p struct{}
	return engine.DecodeParams(params, &p)
}

// Process aligns the request's audio with the transcript in
// Job.Prompt.Text and sends timestamps: one entry per token of the input
// that was spoken (its span of the input, its text there and the words
// spoken for it), in order, monotonic and within the audio's duration,
// over one or more chunks.
//
// # As the audio arrives
//
// Audio is aligned as it arrives, brought to 16 kHz first when it comes
// at another rate (the resampler adds no delay; it only holds the last
// few samples back until the next chunk, which then cross to the next
// sentence, in its leading silence). Its head, the start of the first
// sentence, is decoded block by block (streamBlock samples at a time from
// its start, whatever chunks it comes in) until the decoder settles the
// first words, which are sent at once: about 0.4 s into the audio, while
// the rest of the sentence is still being synthesized. Then, as each
// sentence's end mark comes (a vocoder's engine.Audio.EndOfSentence,
// which the enhance stage keeps), the sentence is aligned as an utterance
// of its own and its words not sent yet are sent, in one chunk, timed
// from the start of the whole audio: an error in one sentence's alignment
// cannot drift into the next. When the audio ends with sentences of the
// transcript left that had no mark, their words are aligned together on
// the audio after the last mark. See stream.go for what is sent early and
// why.
//
// # A streamed request
//
// A request whose text is not known when it starts (Job.Prompt.Text
// empty, as a streamed request's is) has its transcript built a sentence
// at a time from the engine.Span its audio carries (the talker's, which
// a vocoder puts on the sentence's first block): the words of each
// span's text, tied to the request's text by the span's offsets, so that
// the timestamps are those of the same text posted whole. Audio without
// spans is aligned with the request's text (Job.Prompt.Feed) once the
// audio has ended; without either there is no transcript (bad input).
//
// The audio is read as it arrives, whether or not a decoder is free, and
// checked and brought to 16 kHz. A decoder is taken from the pool for the
// head, from its first audio to its first words, and for each sentence's
// alignment; cancellation is noticed while reading and while waiting for
// a decoder. Bad input (an empty
// transcript, no audio, a chunk that is not audio, a rate outside
// [MinSampleRate, MaxSampleRate] or one that changes, more than
// MaxAudioSeconds) is an *engine.InputError.
func (a *Aligner) Process(ctx context.Context, job *engine.Job) error {
	if err := a.CheckParams(job.Params); err != nil {
		return wrap(err)
	}
	// The audio is read as it comes, even while this job waits for a
	// decoder: the vocoder, and the request's audio beside it, must not
	// wait for the aligner.
	in, stop := engine.Prefetch(ctx, job.In)
	defer stop()
	al := &alignment{a: a, input: job.Prompt.Text, out: job.Out, in: &audioReader{src: in}}
	if job.Prompt.Text == "" {
		al.spoken = newSpokenText(job.Prompt.Feed)
	} else {
		words, err := transcript(job.Prompt.Text, a.opts.Voice)
		if err != nil {
			return wrap(err)
		}
		al.words, al.groups = words, bySentence(words)
	}
	defer al.drop()
	return wrap(al.run(ctx))
}

// align aligns words with 16 kHz audio of durMs milliseconds (the
// duration of the audio as it came in) on a decoder from the pool.
func (a *Aligner) align(ctx context.Context, words []word, pcm []int16, durMs int) ([]engine.Word, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := a.pool.get(ctx)
	if err != nil {
		return nil, err
	}
	defer a.pool.put(d)
	return a.alignOn(d, words, pcm, durMs)
}

// alignOn aligns on d, which the caller holds.
func (a *Aligner) alignOn(d *decoder, words []word, pcm []int16, durMs int) ([]engine.Word, error) {
	aligned, _, err := prepare(d, words, false)
	if err != nil {
		return nil, err
	}
	if err := d.decode(pcm); err != nil {
		return nil, err
	}
	segs, ok, err := d.segments()
	if err != nil {
		return nil, err
	}
	e := newEnergy(pcm)
	var spans []span
	if ok {
		spans, ok = place(words, aligned, segs)
	}
	if ok {
		trim(spans, e)
	} else {
		if a.opts.Fallback == FallbackError {
			return nil, fmt.Errorf("%w: %w", ErrNoAlignment, &engine.InputError{Reason: "the audio does not fit the transcript (no alignment found)"})
		}
		spans = split(words, e)
	}
	return finish(words, spans, durMs), nil
}

// prepare adds the words the dictionary lacks and sets the grammar of the
// transcript. It returns which words are in the grammar: a word the
// dictionary lacks and flite gave no usable phones for is left out. With
// probe, the grammar has the probe of its second word (see probeFor), and
// prepare returns its key.
func prepare(d *decoder, words []word, probe bool) ([]bool, string, error) {
	aligned := make([]bool, len(words))
	keys := make([]string, 0, len(words))
	for i, w := range words {
		if !d.has(w.key) {
			if w.phones == "" {
				continue
			}
			if err := d.addWord(w.key, w.phones); err != nil {
				return nil, "", err
			}
		}
		aligned[i] = true
		keys = append(keys, w.key)
	}
	if len(keys) == 0 {
		return nil, "", &engine.InputError{Reason: "the transcript has no word that can be aligned"}
	}
	var pk string
	if probe && len(keys) > 1 {
		var err error
		if pk, err = probeFor(d, keys[1]); err != nil {
			return nil, "", err
		}
	}
	if err := d.setWords(keys, pk); err != nil {
		return nil, "", err
	}
	return aligned, pk, nil
}

// probePrefix starts the dictionary keys of probes; "/" keeps them apart
// from every transcript word's key (see dictKey).
const probePrefix = "omni/probe/"

// probeFor returns the probe of the word key: a dictionary entry that is
// the word's first phone alone, added to the dictionary if need be. A
// hypothesis so far that ends in the probe has gone past the first word
// into the second: the first word is settled about two phones sooner than
// when the second word ends (see stream.go). It returns "" when key has no
// pronunciation.
func probeFor(d *decoder, key string) (string, error) {
	phones := strings.Fields(d.pron(key))
	if len(phones) == 0 {
		return "", nil
	}
	pk := probePrefix + strings.ToLower(phones[0])
	if !d.has(pk) {
		if err := d.addWord(pk, phones[0]); err != nil {
			return "", err
		}
	}
	return pk, nil
}
