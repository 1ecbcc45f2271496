// Package shipped registers the engines a release build ships: the real
// speech engines, the OCR engines, onnx, which serves an ONNX model of the
// user's own, and external, which runs any program speaking the stage
// protocol. Test engines are not among them; the placements that run a
// stage elsewhere (packages placement/remote and placement/process) are
// not engines.
package shipped

import (
	"io"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/enhance"
	"github.com/omnistage/omnistage/internal/engine/external"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/ocr"
	"github.com/omnistage/omnistage/internal/engine/onnxstage"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
)

// Register adds every shipped engine to r. The programs of external
// stages write their standard error to stderr, a line at a time prefixed
// with the replica (nil: os.Stderr).
func Register(r *engine.Registry, stderr io.Writer) {
	flite.Register(r)
	enhance.Register(r)
	sphinx.Register(r)
	ocr.Register(r)
	onnxstage.Register(r)
	external.Register(r, external.Config{Stderr: stderr})
}

// Registry returns a registry holding every shipped engine, whose stage
// programs write to os.Stderr.
func Registry() *engine.Registry {
	r := &engine.Registry{}
	Register(r, nil)
	return r
}
