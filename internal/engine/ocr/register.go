package ocr

// The engines' registration.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// The engines' names.
const (
	EngineDet = "ppocr-det"
	EngineCls = "ppocr-cls"
	EngineRec = "ppocr-rec"
)

// batchKeys are the deploy keys of a batching engine.
var batchKeys = []string{"max_batch", "max_batch_delay"}

// Register adds ppocr-det, ppocr-cls and ppocr-rec to r.
func Register(r *engine.Registry) {
	r.Register(EngineDet, engine.Driver{
		Check: func(spec engine.Spec) error {
			if err := kinds(spec, engine.KindImage, engine.KindRegions); err != nil {
				return err
			}
			_, _, _, _, err := decodeDet(spec.Options)
			return optionsErr(EngineDet, err)
		},
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newDet(spec)
			return e, optionsErr(EngineDet, err)
		},
	})
	r.Register(EngineCls, engine.Driver{
		DeployKeys: batchKeys,
		Check: func(spec engine.Spec) error {
			if err := kinds(spec, engine.KindRegions, engine.KindRegions); err != nil {
				return err
			}
			_, _, err := decodeCls(spec.Options)
			return optionsErr(EngineCls, err)
		},
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newCls(spec)
			return e, optionsErr(EngineCls, err)
		},
	})
	r.Register(EngineRec, engine.Driver{
		DeployKeys: batchKeys,
		Check: func(spec engine.Spec) error {
			if err := kinds(spec, engine.KindRegions, engine.KindRegions); err != nil {
				return err
			}
			_, _, err := decodeRec(spec.Options)
			return optionsErr(EngineRec, err)
		},
		New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := newRec(spec)
			return e, optionsErr(EngineRec, err)
		},
	})
}

// kinds refuses a stage whose declared kinds are not in and out.
func kinds(spec engine.Spec, in, out engine.Kind) error {
	if spec.Input != in || spec.Output != out {
		return fmt.Errorf("this engine takes %s and outputs %s, not %s to %s", in, out, spec.Input, spec.Output)
	}
	return nil
}

func optionsErr(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: options: %w", name, err)
	}
	return nil
}
