package flite

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
func Register(r *engine.Registry) {
	r.Register(TalkerName, engine.Driver{
		Check: func(spec engine.Spec) error { return wrap(TalkerName, checkTalker(spec)) },
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newTalker(spec)
			return e, wrap(TalkerName, err)
		},
	})
	r.Register(VocoderName, engine.Driver{
		Check: func(spec engine.Spec) error { return wrap(VocoderName, checkVocoder(spec)) },
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
