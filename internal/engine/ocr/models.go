package ocr

// The models' files, and a replica's session of one.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
)

// ModelsEnv names the variable that overrides DefaultModels.
const ModelsEnv = "OMNISTAGE_MODELS"

// DefaultModels is where scripts/install-deps.sh and the image put the
// PP-OCRv4 models.
const DefaultModels = "/usr/local/share/omnistage/models/ppocr-v4"

// The files of the models in the models' folder.
const (
	DetFile  = "ch_PP-OCRv4_det_infer.onnx"
	ClsFile  = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	RecFile  = "ch_PP-OCRv4_rec_infer.onnx"
	KeysFile = "ppocr_keys_v1.txt"
)

// modelPath returns the path of a model file: option when set, else file
// in $OMNISTAGE_MODELS, else in DefaultModels.
func modelPath(option, file string) string {
	if option != "" {
		return option
	}
	return filepath.Join(cmp.Or(os.Getenv(ModelsEnv), DefaultModels), file)
}

// checkFile refuses a model file that is missing, naming it and what
// installs it.
func checkFile(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%w (scripts/install-deps.sh installs the PP-OCRv4 models in %s; %s or the stage's option names another place)", err, DefaultModels, ModelsEnv)
	}
	return nil
}

// modelOptions are the options every engine of the package takes: its
// model file and its session's settings.
type modelOptions struct {
	Model string `json:"model"`
	onnx.Options
}

// openModel opens the model at path with opts and checks that it takes
// one float32 tensor of input shaped in (-1: any) and gives one output.
func openModel(path string, opts onnx.Options, in []int64) (*onnx.Session, error) {
	if err := checkFile(path); err != nil {
		return nil, err
	}
	s, err := onnx.Open(path, opts)
	if err != nil {
		return nil, err
	}
	if len(s.Inputs()) != 1 || len(s.Outputs()) != 1 {
		_ = s.Close()
		return nil, fmt.Errorf("model %s has %d inputs and %d outputs; want one of each", path, len(s.Inputs()), len(s.Outputs()))
	}
	decl := []onnx.Spec{{Name: s.Inputs()[0].Name, Type: engine.Float32, Shape: in}}
	if err := s.Declare(decl, nil); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// runModel runs the session on one float32 input of shape and returns
// its one output's float32s and the output, which the caller gives back
// with onnx.Recycle once it is done with them.
func runModel(ctx context.Context, s *onnx.Session, data []float32, shape []int64) ([]float32, engine.Tensor, error) {
	out, err := s.Run(ctx, []engine.Tensor{engine.Float32Tensor(s.Inputs()[0].Name, shape, data)})
	if err != nil {
		return nil, engine.Tensor{}, err
	}
	f, err := out[0].Float32s()
	if err != nil {
		onnx.Recycle(out)
		return nil, engine.Tensor{}, fmt.Errorf("model %s: %w", s.Path(), err)
	}
	return f, out[0], nil
}
