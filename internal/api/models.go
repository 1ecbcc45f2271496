package api

// The pipelines a server serves, a request's choice of one by its model,
// and GET /v1/models and /v1/audio/models.

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/stageserver"
	"github.com/omnistage/omnistage/internal/voice"
)

// ModelAliases are the OpenAI model names a request may send for the
// default pipeline (Options.DefaultModel), besides the pipelines' own
// names.
var ModelAliases = []string{"tts-1", "tts-1-hd", "gpt-4o-mini-tts"}

// served is one pipeline the server serves: its orchestrator, its /v1/run
// and its voices.
type served struct {
	name   string
	orch   *orchestrator.Orchestrator
	cfg    *pipeline.Config
	hop    *stageserver.Server
	voices *voice.Cache
	// startErr is why the pipeline did not start, when Run was told to
	// serve the others anyway (Options.StartPartial).
	startErr atomic.Pointer[error]
}

// notReady returns why p takes no request, or nil.
func (p *served) notReady() error {
	if err := p.startErr.Load(); err != nil {
		return httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "pipeline %s failed to start: %v", p.name, *err)
	}
	return p.orch.NotReady()
}

// model returns the pipeline a request's model names: a pipeline's own
// name, or one of ModelAliases for the default pipeline; no model is the
// default too, unless required.
func (s *Server) model(name string, required bool) (*served, error) {
	var p *served
	switch {
	case name == "" && required:
		return nil, httperr.BadRequest("model is missing: use one of %s", strings.Join(s.modelNames(), ", "))
	case name == "":
		p = s.def
	default:
		p = s.byName[name]
		if p == nil && isAlias(name) {
			p = s.def
		}
	}
	if p == nil {
		return nil, httperr.Errorf(http.StatusNotFound, httperr.CodeModelNotFound, "model %q is not served here; models: %s", quote.Short(name), strings.Join(s.modelNames(), ", "))
	}
	if err := p.startErr.Load(); err != nil {
		return nil, p.notReady()
	}
	return p, nil
}

// textModel is model, for an endpoint that sends text: the pipeline must
// take text.
func (s *Server) textModel(name string, required bool, endpoint string) (*served, error) {
	p, err := s.model(name, required)
	if err != nil {
		return nil, err
	}
	if in := p.cfg.Pipeline.Input; in != engine.KindText {
		return nil, httperr.BadRequest("model %s takes %s, but %s sends text: use a pipeline whose input is text", p.name, in, endpoint)
	}
	return p, nil
}

func isAlias(name string) bool {
	for _, a := range ModelAliases {
		if a == name {
			return true
		}
	}
	return false
}

// modelNames lists the pipelines, then the aliases.
func (s *Server) modelNames() []string {
	names := make([]string, 0, len(s.pipelines)+len(ModelAliases))
	for _, p := range s.pipelines {
		names = append(names, p.name)
	}
	for _, a := range ModelAliases {
		if s.byName[a] == nil {
			names = append(names, a)
		}
	}
	return names
}

// listModels answers GET /v1/models: every pipeline, with what it takes
// and gives, then the aliases.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	list := apijson.ModelList{Object: "list", Data: []apijson.Model{}}
	for _, p := range s.pipelines {
		ready := p.notReady() == nil
		m := apijson.Model{ID: p.name, Object: "model", Created: s.created, OwnedBy: "omnistage",
			Input: string(p.cfg.Pipeline.Input), Outputs: p.cfg.Route.Outputs(), Ready: &ready}
		_, m.WordTimestamps = p.cfg.Route.Aligner()
		if s.opts.Stage == nil {
			for _, v := range p.voices.Set().Voices() {
				m.Voices = append(m.Voices, v.ID)
			}
		}
		list.Data = append(list.Data, m)
	}
	for _, a := range ModelAliases {
		if s.byName[a] == nil {
			list.Data = append(list.Data, apijson.Model{ID: a, Object: "model", Created: s.created, OwnedBy: "omnistage", AliasOf: s.def.name})
		}
	}
	httpbody.WriteJSON(w, http.StatusOK, list)
}

// listAudioModels answers GET /v1/audio/models: the models a speech
// request may name, in the shape Open WebUI reads.
func (s *Server) listAudioModels(w http.ResponseWriter, r *http.Request) {
	list := apijson.AudioModels{Models: []apijson.AudioModel{}}
	for _, p := range s.pipelines {
		if p.cfg.Pipeline.Input == engine.KindText && p.cfg.Route.Produces(engine.KindAudio) {
			list.Models = append(list.Models, apijson.AudioModel{ID: p.name, Name: p.name})
		}
	}
	for _, a := range ModelAliases {
		if s.byName[a] == nil {
			list.Models = append(list.Models, apijson.AudioModel{ID: a, Name: a + " (" + s.def.name + ")"})
		}
	}
	httpbody.WriteJSON(w, http.StatusOK, list)
}

// queryModel returns the pipeline the request's ?model= names, the default
// one without it.
func (s *Server) queryModel(r *http.Request) (*served, error) {
	name := r.URL.Query().Get("model")
	if name == "" {
		return s.def, nil
	}
	return s.model(name, false)
}
