package api

// GET and DELETE /v1/requests/{id}: a request's state, and its abort.

import (
	"net/http"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// abort aborts a request and waits for its stages to drain: 200 when they
// did, 404 for an unknown id, 504 (abort_failed) when the drain outlasted
// the abort timeout; the request then shows as abort_failed in GET until
// it ends.
func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info(r).id = id
	// The pipelines share one registry of ids: any of them finds it.
	if err := s.def.orch.Abort(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	httpbody.WriteJSON(w, http.StatusOK, apijson.RequestState{ID: id, State: "aborted"})
}

// lookup returns the state of an active or draining request: active,
// aborting or abort_failed.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info(r).id = id
	state, ok := s.def.orch.Lookup(id)
	if !ok {
		s.fail(w, r, httperr.Errorf(http.StatusNotFound, string(orchestrator.CodeNotFound), "no active request with id %q (it has ended, or never started)", id))
		return
	}
	httpbody.WriteJSON(w, http.StatusOK, apijson.RequestState{ID: id, State: state.String()})
}
