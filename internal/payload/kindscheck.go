package payload

// What a tensor, image or regions chunk must be to cross a hop: the
// kinds' own checks (engine.Tensors, engine.Image and engine.Regions
// Check), which every carrier of the kinds shares.

import (
	"errors"

	"github.com/omnistage/omnistage/internal/engine"
)

// checkProblem is the reason of check's *engine.InputError, or "".
func checkProblem(check func() error) string {
	err := check()
	if err == nil {
		return ""
	}
	var ie *engine.InputError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}

func tensorsProblem(ts *engine.Tensors) string { return checkProblem(ts.Check) }

func imageProblem(im *engine.Image) string { return checkProblem(im.Check) }

func regionsProblem(rs *engine.Regions) string { return checkProblem(rs.Check) }
