package api

// Voices: what a speech request's voice may name (package voice), and GET
// /v1/audio/voices.

import (
	"errors"
	"maps"
	"net/http"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/voice"
)

// checkVoiceAliases refuses aliases the configuration gives that name none
// of the talker's voices, as far as they are known before it starts.
func checkVoiceAliases(o *orchestrator.Orchestrator, aliases map[string]string) error {
	_, err := voice.NewSet(o.Voices(), aliases, !maps.Equal(aliases, pipeline.DefaultVoiceAliases))
	return err
}

// resolveVoice returns the talker's voice that a request's voice names in
// pipeline p; a name that names none is a 400 that lists them.
func resolveVoice(p *served, name string) (string, error) {
	v, err := p.voices.Set().Resolve(name)
	if ue := (*voice.UnknownError)(nil); errors.As(err, &ue) {
		return "", httperr.BadRequest("%v (GET /v1/audio/voices lists them)", err)
	}
	return v, err
}

// listVoices answers GET /v1/audio/voices: the voices of the pipeline
// ?model= names, the default one's without it.
func (s *Server) listVoices(w http.ResponseWriter, r *http.Request) {
	p, err := s.queryModel(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list := apijson.VoiceList{Voices: []apijson.VoiceEntry{}}
	for _, e := range p.voices.Set().Entries() {
		list.Voices = append(list.Voices, apijson.VoiceEntry(e))
	}
	httpbody.WriteJSON(w, http.StatusOK, list)
}
