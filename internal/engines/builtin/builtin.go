// Package builtin registers the engines a release build ships: the real
// speech engines, and the remote and worker engines. Test engines are not
// among them.
package builtin

import (
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/enhance"
	"github.com/omnistage/omnistage/internal/engines/flite"
	"github.com/omnistage/omnistage/internal/engines/remote"
	"github.com/omnistage/omnistage/internal/engines/sphinx"
	"github.com/omnistage/omnistage/internal/engines/worker"
)

// Register adds every shipped engine to r.
func Register(r *engine.Registry) {
	flite.Register(r)
	enhance.Register(r)
	sphinx.Register(r)
	remote.Register(r)
	worker.Register(r)
}

// Registry returns a registry holding every shipped engine.
func Registry() *engine.Registry {
	r := &engine.Registry{}
	Register(r)
	return r
}
