package orchestrator

// A request's notes: what its stages tell the caller about the answer
// that is not an error (engine.Note).

import (
	"slices"
	"sync"

	"github.com/omnistage/omnistage/internal/quote"
)

// Bounds of a request's notes: later ones, and the rest of a long one,
// are dropped.
const maxNotes = 16

// Note is one stage's note.
type Note struct {
	Stage   int
	Message string
}

// notes gathers a request's notes.
type notes struct {
	mu   sync.Mutex
	list []Note
}

// stageNoter is the engine.Noter of one stage of a request.
type stageNoter struct {
	rq    *request
	stage int
}

func (n stageNoter) Note(msg string) {
	ns := &n.rq.notes
	ns.mu.Lock()
	defer ns.mu.Unlock()
	note := Note{Stage: n.stage, Message: quote.Short(msg)}
	// A stage run again on another replica (migrate.go) notes again what
	// it noted before.
	if len(ns.list) < maxNotes && !slices.Contains(ns.list, note) {
		ns.list = append(ns.list, note)
	}
}

// Notes returns the notes the request's stages made, in the order they
// made them; all of them once the request has ended.
func (s *Stream) Notes() []Note {
	ns := &s.rq.notes
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return slices.Clone(ns.list)
}
