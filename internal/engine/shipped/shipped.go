// Package shipped registers the engines a release build ships: the real
// speech engines, and external, which runs any program speaking the stage
// protocol. Test engines are not among them; the placements that run a
// stage elsewhere (packages placement/remote and placement/process) are not
// engines.
package shipped

import (
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/enhance"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
)

// Register adds every shipped engine to r.
func Register(r *engine.Registry) {
	flite.Register(r)
	enhance.Register(r)
	sphinx.Register(r)
}

// Registry returns a registry holding every shipped engine.
func Registry() *engine.Registry {
	r := &engine.Registry{}
	Register(r)
	return r
}
