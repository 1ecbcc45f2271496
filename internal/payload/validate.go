package payload

// The checks of an envelope and its chunks: those that hold whatever the
// server, and those against the server's Expect.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// check reports whether e may be run by the server described by want:
// the checks of validate plus those that need the pipeline.
func (e *Envelope) check(want *Expect) *Error {
	return e.checkFor(want, func() *Error {
		if e.To != want.Stage {
			return newError(CodeWrongStage, "payload is for stage %d, this server runs stage %d; post it to stage %d's server", e.To, want.Stage, e.To)
		}
		return nil
	})
}

// checkFor is check with the test that e is meant for stage want.Stage
// given by stage: a stream's result header is compared by its From.
func (e *Envelope) checkFor(want *Expect, stage func() *Error) *Error {
	if err := e.required(); err != nil {
		return err
	}
	if e.Pipeline != want.Pipeline {
		return newError(CodeWrongPipeline, "payload is for pipeline %q, this server runs pipeline %q", e.Pipeline, want.Pipeline)
	}
	if e.Digest != want.Digest {
		return newError(CodeWrongPipeline, "payload was made by another configuration of pipeline %q: its stages or route changed since the request started; run the request again from stage 0", e.Pipeline)
	}
	last := want.NumStages - 1
	for _, id := range []struct {
		name string
		id   int
	}{{"from", e.From}, {"to", e.To}, {"final", e.Final}} {
		if id.id < 0 || id.id > last {
			return newError(CodeOutOfRange, "payload's %s stage is %d, but pipeline %q has stage ids 0..%d", id.name, id.id, want.Pipeline, last)
		}
	}
	if err := stage(); err != nil {
		return err
	}
	for i, o := range e.Carried {
		if o.Stage < 0 || o.Stage > last {
			return newError(CodeOutOfRange, "payload's carried[%d] comes from stage %d, but pipeline %q has stage ids 0..%d", i, o.Stage, want.Pipeline, last)
		}
	}
	if err := e.validate(); err != nil {
		return err
	}
	if n := want.numParams(); len(e.Params) != n {
		return newError(CodeOutOfRange, "payload has %d sampling_params entries, but pipeline %q needs %d, one per stage id", len(e.Params), want.Pipeline, n)
	}
	if want.Input != "" && len(e.Data) > 0 && e.Data[0].Kind() != want.Input {
		return newError(CodeBadChunk, "payload data[0] is %s, but stage %d takes %s", e.Data[0].Kind(), want.Stage, want.Input)
	}
	return nil
}

// required reports the first field that the schema says must not be empty
// and is.
func (e *Envelope) required() *Error {
	if name := firstEmpty(envelopeSchema, e); name != "" {
		return newError(CodeMissingField, "payload has no %s", name)
	}
	return nil
}

// validate reports the first problem of e that does not depend on the
// pipeline: what every envelope must satisfy before it is encoded or after
// it is decoded.
func (e *Envelope) validate() *Error {
	if e.Version != 0 && e.Version != FormatVersion {
		return newError(CodeUnsupportedVersion, "payload has format version %d, this server reads version %d", e.Version, FormatVersion)
	}
	if err := e.required(); err != nil {
		return err
	}
	for _, s := range []struct{ name, s string }{
		{"pipeline", e.Pipeline}, {"transfer_id", e.TransferID}, {"request_id", e.RequestID}, {"trace", e.Trace}, {"prompt text", e.Prompt.Text},
	} {
		if !utf8.ValidString(s.s) {
			return newError(CodeUndecodable, "payload's %s is not valid UTF-8", s.name)
		}
	}
	for _, id := range []struct {
		name string
		id   int
	}{{"from", e.From}, {"to", e.To}, {"final", e.Final}} {
		if id.id < 0 {
			return newError(CodeOutOfRange, "payload's %s stage is %d; stage ids start at 0", id.name, id.id)
		}
	}
	// The checks every request's params and modalities pass, whichever
	// way they came.
	if err := pipeline.CheckParams(e.Params, nil); err != nil {
		return newError(CodeUndecodable, "payload's %v", err)
	}
	if err := pipeline.CheckModalities(e.Outputs); err != nil {
		return newError(CodeOutOfRange, "payload's %v", err)
	}
	for i, o := range e.Carried {
		if o.Stage < 0 {
			return newError(CodeOutOfRange, "payload's carried[%d] comes from stage %d; stage ids start at 0", i, o.Stage)
		}
		if !slices.Contains(e.Outputs, string(o.Kind)) {
			return newError(CodeOutOfRange, "payload's carried[%d] is %q, which is not one of the request's output_modalities (%s)", i, o.Kind, strings.Join(e.Outputs, ", "))
		}
		for _, p := range e.Carried[:i] {
			if p.Kind == o.Kind {
				return newError(CodeOutOfRange, "payload carries two %s outputs (from stages %d and %d); it carries at most one per kind", o.Kind, p.Stage, o.Stage)
			}
		}
		if err := validateChunks(fmt.Sprintf("carried[%d].chunks", i), o.Chunks, o.Kind); err != nil {
			return err
		}
	}
	return validateChunks("data", e.Data, "")
}

// validateChunks checks each chunk of cs and that all have the same kind:
// kind, when it is not "".
func validateChunks(where string, cs []engine.Chunk, kind engine.Kind) *Error {
	for i := range cs {
		c := &cs[i]
		if p := chunkProblem(c); p != "" {
			return newError(CodeBadChunk, "payload %s[%d]: %s", where, i, p)
		}
		switch k := c.Kind(); {
		case kind == "":
			kind = k
		case k != kind:
			return newError(CodeBadChunk, "payload %s[%d] is %s, but the stream is %s; a stream has one kind", where, i, k, kind)
		}
	}
	return nil
}

// chunkProblem describes what is wrong with c, or returns "".
func chunkProblem(c *engine.Chunk) string {
	n := 0
	for _, set := range [...]bool{c.Text != nil, c.Frames != nil, c.Segments != nil, c.Audio != nil, c.Words != nil,
		c.Tensors != nil, c.Image != nil, c.Regions != nil, c.Data != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Sprintf("a chunk holds exactly one of text, frames, segments, audio, words, tensors, image, regions or data; this one holds %d", n)
	}
	if c.Span != nil {
		if p := spanProblem(c.Span); p != "" {
			return p
		}
	}
	switch {
	case c.Text != nil:
		if !utf8.ValidString(c.Text.Text) {
			return "text is not valid UTF-8"
		}
	case c.Frames != nil:
		return framesProblem(c.Frames)
	case c.Data != nil:
		return dataProblem(c.Data)
	case c.Tensors != nil:
		return tensorsProblem(c.Tensors)
	case c.Image != nil:
		return imageProblem(c.Image)
	case c.Regions != nil:
		return regionsProblem(c.Regions)
	case c.Segments != nil:
		return segmentsProblem(c.Segments)
	case c.Audio != nil:
		if c.Audio.SampleRate <= 0 {
			return fmt.Sprintf("audio has sample rate %d; want a positive rate in Hz", c.Audio.SampleRate)
		}
	case c.Words != nil:
		for i, w := range c.Words.Words {
			switch {
			case !utf8.ValidString(w.Word):
				return fmt.Sprintf("words[%d] is not valid UTF-8", i)
			case w.StartMs < 0 || w.EndMs < w.StartMs:
				return fmt.Sprintf("words[%d] %q spans %d..%d ms; want 0 <= start_ms <= end_ms", i, w.Word, w.StartMs, w.EndMs)
			case w.CharStart < 0 || w.CharEnd < w.CharStart:
				return fmt.Sprintf("words[%d] %q spans characters %d..%d; want 0 <= char_start <= char_end", i, w.Word, w.CharStart, w.CharEnd)
			case slices.ContainsFunc(w.Spoken, func(s string) bool { return !utf8.ValidString(s) }):
				return fmt.Sprintf("words[%d] has a spoken word that is not valid UTF-8", i)
			}
		}
	}
	return ""
}

// spanProblem describes what is wrong with a chunk's span, or returns "".
func spanProblem(s *engine.Span) string {
	switch {
	case s.Sentence < 0:
		return fmt.Sprintf("span of sentence %d; sentences count from 0", s.Sentence)
	case s.Start < 0 || s.End < s.Start:
		return fmt.Sprintf("span of characters %d..%d; want 0 <= start <= end", s.Start, s.End)
	case !utf8.ValidString(s.Text):
		return "span text is not valid UTF-8"
	case s.Text != "" && utf8.RuneCountInString(s.Text) != s.End-s.Start:
		return fmt.Sprintf("span text has %d code points, but the span covers %d (%d..%d)", utf8.RuneCountInString(s.Text), s.End-s.Start, s.Start, s.End)
	}
	return ""
}

func dataProblem(d *engine.Data) string {
	switch {
	case !utf8.ValidString(string(d.Kind)):
		return "data kind is not valid UTF-8"
	case d.Kind.Valid():
		return fmt.Sprintf("data of kind %s, a built-in kind, which has its own key", d.Kind)
	}
	if err := engine.CheckMeta(d.Meta); err != nil {
		return "data " + err.Error()
	}
	for k, v := range d.Meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return "data meta is not valid UTF-8"
		}
	}
	return ""
}

func framesProblem(f *engine.Frames) string {
	switch {
	case !utf8.ValidString(f.Voice):
		return "frames voice is not valid UTF-8"
	case f.Channels <= 0:
		return fmt.Sprintf("frames have %d channels; want at least 1", f.Channels)
	case len(f.Params)%f.Channels != 0:
		return fmt.Sprintf("frames have %d params, not a whole number of frames of %d channels", len(f.Params), f.Channels)
	case f.StrChannels < 0:
		return fmt.Sprintf("frames have %d str_channels; want 0 or more", f.StrChannels)
	case len(f.Str) != f.Len()*f.StrChannels:
		return fmt.Sprintf("frames have %d excitation strengths, but %d frames of %d str_channels need %d", len(f.Str), f.Len(), f.StrChannels, f.Len()*f.StrChannels)
	case !(f.FrameShift > 0) || math.IsInf(float64(f.FrameShift), 0):
		return fmt.Sprintf("frames have frame_shift %g; want a positive number of seconds", f.FrameShift)
	}
	if i := nonFinite(f.Params); i >= 0 {
		return fmt.Sprintf("frames params[%d] is %g; want a finite number", i, f.Params[i])
	}
	if i := nonFinite(f.Str); i >= 0 {
		return fmt.Sprintf("frames str[%d] is %g; want a finite number", i, f.Str[i])
	}
	return ""
}

func segmentsProblem(s *engine.Segments) string {
	switch {
	case !utf8.ValidString(s.Voice):
		return "segments voice is not valid UTF-8"
	case len(s.Ends) != len(s.Names) || len(s.Cluster) != len(s.Names):
		return fmt.Sprintf("segments have %d names, %d ends and %d cluster flags; want one of each per segment", len(s.Names), len(s.Ends), len(s.Cluster))
	case len(s.TargetPos) != len(s.TargetF0):
		return fmt.Sprintf("segments have %d target positions and %d target F0s; want one of each per target", len(s.TargetPos), len(s.TargetF0))
	}
	for i, name := range s.Names {
		if !utf8.ValidString(name) {
			return fmt.Sprintf("segments names[%d] is not valid UTF-8", i)
		}
	}
	for _, fs := range []struct {
		name string
		s    []float32
	}{{"ends", s.Ends}, {"target_pos", s.TargetPos}, {"target_f0", s.TargetF0}} {
		if i := nonFinite(fs.s); i >= 0 {
			return fmt.Sprintf("segments %s[%d] is %g; want a finite number", fs.name, i, fs.s[i])
		}
	}
	return ""
}

// nonFinite returns the index of the first NaN or infinity in s, or -1.
func nonFinite(s []float32) int {
	for i, v := range s {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// numParams returns the required length of Params.
func (x *Expect) numParams() int {
	if x.NumParams == 0 {
		return x.NumStages
	}
	return x.NumParams
}

// valid reports a misuse of Expect by the caller (a bug, not bad input).
func (x *Expect) valid() error {
	switch {
	case x.NumStages < 1:
		return fmt.Errorf("payload: Expect.NumStages is %d; want at least 1", x.NumStages)
	case x.Stage < 0 || x.Stage >= x.NumStages:
		return fmt.Errorf("payload: Expect.Stage is %d, outside 0..%d", x.Stage, x.NumStages-1)
	case x.NumParams < 0:
		return fmt.Errorf("payload: Expect.NumParams is %d", x.NumParams)
	case x.Input != "" && !x.Input.Valid() && !engine.KindNameOK(string(x.Input)):
		return fmt.Errorf("payload: Expect.Input %q is not a kind", x.Input)
	case x.Pipeline == "":
		return fmt.Errorf("payload: Expect.Pipeline is empty")
	case x.Digest == [32]byte{}:
		return fmt.Errorf("payload: Expect.Digest is zero")
	}
	return nil
}
