package flite

// The flite-talker engine: text in, frames or segments out, one chunk per
// sentence.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
)

// Talker is the flite-talker engine: text in, one frames (clustergen voices)
// or segments (kal16) chunk per sentence out.
type Talker struct {
	voice *voice
}

var (
	_ engine.Engine        = (*Talker)(nil)
	_ engine.ParamsChecker = (*Talker)(nil)
	_ engine.PromptChecker = (*Talker)(nil)
)

// options are the flite engines' deploy options.
type options struct {
	Voice string `json:"voice"`
}

func decodeOptions(o engine.Options) (*voice, error) {
	var opts options
	if err := o.Decode(&opts); err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	if opts.Voice == "" {
		opts.Voice = DefaultVoice
	}
	v, err := lookupVoice(opts.Voice)
	if err != nil {
		return nil, fmt.Errorf("options: voice: unknown voice %q (have %v)", opts.Voice, Voices())
	}
	return v, nil
}

func checkTalker(spec engine.Spec) error {
	v, err := decodeOptions(spec.Options)
	if err != nil {
		return err
	}
	if spec.Input != engine.KindText && spec.Input != engine.KindRegions {
		return fmt.Errorf("voice %q: talker input must be %q (or %q: the text read in an image), not %q", v.name, engine.KindText, engine.KindRegions, spec.Input)
	}
	if spec.Output != v.kind {
		return fmt.Errorf("voice %q outputs %q, but the stage declares output %q", v.name, v.kind, spec.Output)
	}
	return nil
}

func newTalker(spec engine.Spec) (engine.Engine, error) {
	if err := checkTalker(spec); err != nil {
		return nil, err
	}
	if err := initFlite(); err != nil {
		return nil, err
	}
	v, _ := decodeOptions(spec.Options)
	return &Talker{voice: v}, nil
}

// request is a talker request's resolved params.
type request struct {
	voice   *voice
	stretch float32 // 0 keeps the voice's own duration_stretch
}

func (t *Talker) params(raw json.RawMessage) (request, error) {
	var p talker.Params
	if err := engine.DecodeParams(raw, &p); err != nil {
		return request{}, err
	}
	r := request{voice: t.voice}
	if p.Voice != "" {
		v, err := lookupVoice(p.Voice)
		if err != nil {
			return request{}, &engine.ParamError{Field: "voice", Reason: fmt.Sprintf("unknown voice %q (have %v)", p.Voice, Voices())}
		}
		if v.kind != t.voice.kind {
			return request{}, &engine.ParamError{Field: "voice", Reason: fmt.Sprintf("voice %q outputs %s but this stage outputs %s (voice %q)", v.name, v.kind, t.voice.kind, t.voice.name)}
		}
		r.voice = v
	}
	switch {
	case p.Speed == nil || *p.Speed == 1:
	case !talker.SpeedOK(*p.Speed):
		return request{}, &engine.ParamError{Field: "speed", Reason: fmt.Sprintf("%g is outside [%g, %g]", *p.Speed, talker.MinSpeed, talker.MaxSpeed)}
	default:
		r.stretch = r.voice.durStretch / float32(*p.Speed)
	}
	return r, nil
}

// CheckPrompt implements engine.PromptChecker: it refuses text that the
// talker would refuse (nothing to speak, too long, not UTF-8), before any
// stage runs.
func (t *Talker) CheckPrompt(text string, params json.RawMessage) error {
	if _, err := cleanTextMap(text); err != nil {
		return fmt.Errorf("flite-talker: %w", err)
	}
	return nil
}

// CheckParams implements engine.ParamsChecker.
func (t *Talker) CheckParams(params json.RawMessage) error {
	_, err := t.params(params)
	return err
}

// Warm synthesizes a short sentence with the stage's voice.
func (t *Talker) Warm(ctx context.Context) error {
	_, err := t.sentence(request{voice: t.voice}, "Hello, this is a warm up.")
	return err
}

// Close implements engine.Engine; the voices live as long as the process.
func (t *Talker) Close() error { return nil }

// Process reads the text as it comes (one chunk for a whole request, the
// pieces of a streamed one), splits it into sentences with flite's
// tokenizer and utterance-break rule, and sends one chunk per sentence as
// soon as the sentence is complete and synthesized: a sentence is spoken
// once the text after it settles where it ends (see pending), the rest at
// the input's end, so a text gives the same chunks however it is cut into
// pieces. Sentences without words (a lone "--") are skipped; text
// without any word is an *engine.InputError.
func (t *Talker) Process(ctx context.Context, job *engine.Job) error {
	req, err := t.params(job.Params)
	if err != nil {
		return fmt.Errorf("flite-talker: %w", err)
	}
	sp := &speaker{t: t, req: req, out: job.Out, text: pending{voice: req.voice}}
	var read *regionsReader // the text of an image, when the input is its regions
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		mode := cutSettled
		switch {
		case c.Text != nil && read == nil:
			sp.text.add(c.Text.Text)
			if c.Text.Break {
				mode = cutAll
			}
		case c.Regions != nil:
			if read == nil {
				read = &regionsReader{}
			}
			sp.text.add(read.add(ctx, c.Regions.Regions))
		default:
			return fmt.Errorf("flite-talker: %w", &engine.InputError{Reason: fmt.Sprintf("talker input must be text or regions, got %q", c.Kind())})
		}
		if err := sp.speak(ctx, mode); err != nil {
			return err
		}
	}
	if err := sp.speak(ctx, cutFinal); err != nil && !(read != nil && (errors.Is(err, errNoSpeakable) || errors.Is(err, errTextEmpty))) {
		return err
	}
	switch {
	case sp.sent > 0:
	case read != nil:
		// An image whose text has nothing to speak (or no text at all)
		// is read aloud as silence, not refused.
		if read.n > 0 {
			engine.Note(ctx, "nothing of the image's text could be spoken: the voices speak English, and read Latin letters and digits")
		}
	default:
		return fmt.Errorf("flite-talker: %w", &engine.InputError{Reason: "text has nothing to speak"})
	}
	return nil
}

// regionsReader turns an image's text regions, as they come, into the
// text the talker speaks (engine.RegionsText: each region's text on a line
// of its own, so that offsets into it are those the API gives each
// region), and notes the regions it has nothing of to speak.
type regionsReader struct {
	text engine.RegionsText
	n    int // regions with text
}

// add returns the text that rs add.
func (r *regionsReader) add(ctx context.Context, rs []engine.Region) string {
	for _, reg := range rs {
		if reg.Text == "" {
			continue
		}
		r.n++
		if _, err := cleanTextMap(reg.Text); err != nil {
			engine.Note(ctx, fmt.Sprintf("region %d (%q) is not spoken: the voices speak English, and read Latin letters and digits", reg.Index, reg.Text))
		}
	}
	return r.text.Add(rs)
}

// speaker speaks the sentences of one talker job as they complete.
type speaker struct {
	t    *Talker
	req  request
	out  engine.Sink
	text pending
	n    int // sentences cut so far
	sent int // chunks sent
}

// speak synthesizes and sends the sentences that are complete, as mode
// says.
func (sp *speaker) speak(ctx context.Context, mode cutMode) error {
	final := mode == cutFinal
	sentences, err := sp.text.take(mode)
	if err != nil && !(final && sp.sent > 0 && (err == errTextEmpty || err == errNoSpeakable)) {
		return fmt.Errorf("flite-talker: %w", err)
	}
	for _, s := range sentences {
		sp.n++
		if err := ctx.Err(); err != nil {
			return err
		}
		turn, err := engine.Turn(ctx)
		if err != nil {
			return err
		}
		c, err := sp.t.sentence(sp.req, s.text)
		turn.End()
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return fmt.Errorf("flite-talker: %w", err)
		}
		if err := vocodable(c); err != nil {
			return fmt.Errorf("flite-talker: sentence %d: %w", sp.n, err)
		}
		c.Span = &engine.Span{Sentence: sp.sent, Start: s.start, End: s.end, Text: s.input}
		if err := sp.out.Send(ctx, c); err != nil {
			return err
		}
		sp.sent++
	}
	return nil
}

// sentence synthesizes one clean sentence into a chunk.
func (t *Talker) sentence(req request, s string) (engine.Chunk, error) {
	if req.voice.kind == engine.KindFrames {
		f, err := talkFrames(req.voice, s, req.stretch)
		return engine.Chunk{Frames: f}, err
	}
	seg, err := talkSegments(req.voice, s, req.stretch)
	return engine.Chunk{Segments: seg}, err
}

// vocodable checks a talker chunk with the vocoder's own validation, so the
// talker never sends what the vocoder refuses. Only length can fail here:
// one sentence of flite speech longer than MaxChunkSeconds (a huge number
// read digit by digit, or a long unpunctuated run at a slow speed).
func vocodable(c engine.Chunk) error {
	var secs float64
	var err error
	if c.Frames != nil {
		secs = float64(c.Frames.Len()) * float64(c.Frames.FrameShift)
		_, err = validateFrames(c.Frames)
	} else {
		secs = float64(c.Segments.Ends[len(c.Segments.Ends)-1])
		_, err = validateSegments(c.Segments)
	}
	if secs > MaxChunkSeconds {
		return &engine.InputError{Reason: fmt.Sprintf("speech of one sentence lasts %.0f s; the limit is %d s: break the text up with punctuation", secs, MaxChunkSeconds)}
	}
	if err != nil {
		// Not the caller's fault: a bug here or in flite, so no %w that
		// would turn it into an *engine.InputError.
		return fmt.Errorf("talker output fails validation: %v", err)
	}
	return nil
}
