package flite

// The flite drivers and their voices.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// Engine names in pipeline configs.
const (
	TalkerName  = "flite-talker"
	VocoderName = "flite-vocoder"
)

// Register adds the flite-talker and flite-vocoder drivers to r.
//
// Both accept the deploy option "voice" (slt, rms, awb or kal16; default
// slt). Check refuses a stage whose declared kinds do not fit the voice: a
// talker reads text and writes frames (clustergen voices) or segments
// (kal16); a vocoder reads frames or segments and writes audio.
//
// Both replay deterministically (engine.Replay): the talker's sentences
// depend on the text alone, and the vocoder seeds its noise with the
// request's seed before each sentence, so a job run again from a
// sentence's start makes the very chunks of the first run (and a stage
// takes the deploy key migrate).
func Register(r *engine.Registry) {
	r.Register(TalkerName, engine.Driver{
		Voices:     VoiceInfo,
		Replay:     &engine.Replay{Deterministic: true},
		DeployKeys: []string{"migrate"},
		Check:      func(spec engine.Spec) error { return wrap(TalkerName, checkTalker(spec)) },
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newTalker(spec)
			return e, wrap(TalkerName, err)
		},
	})
	r.Register(VocoderName, engine.Driver{
		Replay:     &engine.Replay{Deterministic: true},
		DeployKeys: []string{"migrate"},
		Check:      func(spec engine.Spec) error { return wrap(VocoderName, checkVocoder(spec)) },
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newVocoder(spec)
			return e, wrap(VocoderName, err)
		},
	})
}

func wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// VoiceInfo describes the voices built into this flite: the clustergen
// voices (slt, rms, awb) speak with the talker's frames, kal16 (a diphone
// voice) with segments, so each is listed only for a talker that outputs
// its kind.
var VoiceInfo = []engine.Voice{
	{ID: "slt", Name: "SLT (CMU Arctic)", Language: "en-US", Gender: "female", Output: engine.KindFrames},
	{ID: "rms", Name: "RMS (CMU Arctic)", Language: "en-US", Gender: "male", Output: engine.KindFrames},
	{ID: "awb", Name: "AWB (CMU Arctic)", Language: "en-GB-scotland", Gender: "male", Output: engine.KindFrames},
	{ID: "kal16", Name: "KAL (diphone)", Language: "en-US", Gender: "male", Output: engine.KindSegments},
}
