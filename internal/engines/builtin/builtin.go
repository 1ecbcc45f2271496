// Package builtin registers the engines a release build ships: the real
// speech engines. Test engines are not among them; the placements that
// run a stage elsewhere (packages remote and worker) are not engines.
package builtin

import (
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/enhance"
	"github.com/omnistage/omnistage/internal/engines/flite"
	"github.com/omnistage/omnistage/internal/engines/sphinx"
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
