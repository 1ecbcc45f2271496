package api

// The probes: GET /health, while the process serves, and GET /ready, once
// the pipelines take requests.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
)

// The probes: GET /health, while the process serves, and GET /ready, once
// the pipelines take requests.

// health answers GET /health.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	httpbody.WriteJSON(w, http.StatusOK, apijson.Status{Status: "ok"})
}

// ready answers GET /ready: 200 once every pipeline takes requests
// (with ?model=, that one), else 503 naming each pipeline that does not
// and why.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		s.fail(w, r, httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "server is shutting down"))
		return
	}
	check := s.pipelines
	if r.URL.Query().Has("model") {
		p, err := s.queryModel(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		check = []*served{p}
	}
	// A pipeline that failed to start will not become ready: the server is
	// ready once the others are, and names it, unless it is all there is
	// to check.
	var why []string
	failed := map[string]string{}
	for _, p := range check {
		if err := p.startErr.Load(); err != nil && len(check) > 1 {
			failed[p.name] = (*err).Error()
		} else if err := p.notReady(); err != nil {
			why = append(why, err.Error())
		}
	}
	if len(why) > 0 || len(failed) == len(check) {
		for _, name := range slices.Sorted(maps.Keys(failed)) {
			why = append(why, fmt.Sprintf("pipeline %s failed to start: %s", name, failed[name]))
		}
		s.fail(w, r, httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "%s", strings.Join(why, "; ")))
		return
	}
	st := apijson.Status{Status: "ready"}
	if len(failed) > 0 {
		st.Unavailable = failed
	}
	httpbody.WriteJSON(w, http.StatusOK, st)
}
