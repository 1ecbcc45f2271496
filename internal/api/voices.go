package api

// Voices: what a speech request's voice may name, and GET
// /v1/audio/voices.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
)

// voiceSet is what a speech request's voice may name: the talker's own
// voices (when its engine describes them) and the configuration's aliases
// (voice_aliases), both matched case-insensitively.
type voiceSet struct {
	voices  []engine.Voice
	aliases map[string]string // lower-case alias → voice
	list    apijson.VoiceList // GET /v1/audio/voices
}

// newVoiceSet checks that every alias names one of voices, when the talker
// describes its voices: with strict, an alias that does not is an error;
// without, it is left out (the default aliases name flite's voices, which
// another talker lacks).
func newVoiceSet(voices []engine.Voice, aliases map[string]string, strict bool) (*voiceSet, error) {
	vs := &voiceSet{voices: voices, aliases: map[string]string{}}
	list := []apijson.VoiceEntry{}
	for _, v := range voices {
		list = append(list, apijson.VoiceEntry{Voice: v})
	}
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		target := aliases[alias]
		entry := apijson.VoiceEntry{Voice: engine.Voice{ID: alias, Name: alias}, AliasOf: target}
		if len(voices) > 0 {
			i := slices.IndexFunc(voices, func(v engine.Voice) bool { return strings.EqualFold(v.ID, target) })
			if i < 0 && !strict {
				continue
			}
			if i < 0 {
				return nil, fmt.Errorf("voice_aliases.%s: %q is not a voice of the talker (voices: %s)", alias, target, strings.Join(vs.ids(), ", "))
			}
			entry.Language, entry.Gender, target = voices[i].Language, voices[i].Gender, voices[i].ID
			entry.Name = fmt.Sprintf("%s (%s)", alias, voices[i].Name)
		}
		vs.aliases[alias] = target
		list = append(list, entry)
	}
	vs.list = apijson.VoiceList{Voices: list}
	return vs, nil
}

func (vs *voiceSet) ids() []string {
	var ids []string
	for _, v := range vs.voices {
		ids = append(ids, v.ID)
	}
	return ids
}

// resolve returns the talker's voice that name stands for. When the talker
// describes no voices (its engine runs elsewhere), a name that is not an
// alias goes to it as given, and it judges.
func (vs *voiceSet) resolve(name string) (string, error) {
	lower := strings.ToLower(name)
	if v, ok := vs.aliases[lower]; ok {
		return v, nil
	}
	if len(vs.voices) == 0 {
		return lower, nil
	}
	for _, v := range vs.voices {
		if strings.EqualFold(v.ID, name) {
			return v.ID, nil
		}
	}
	aliases := ""
	if len(vs.aliases) > 0 {
		aliases = ", and the aliases " + strings.Join(slices.Sorted(maps.Keys(vs.aliases)), ", ")
	}
	return "", httperr.BadRequest("unknown voice %q: voices are %s%s (GET /v1/audio/voices lists them)",
		quote.Short(name), strings.Join(vs.ids(), ", "), aliases)
}

// checkVoiceAliases refuses aliases the configuration gives that name none
// of the talker's voices, as far as they are known before it starts.
func checkVoiceAliases(o *orchestrator.Orchestrator, aliases map[string]string) error {
	_, err := newVoiceSet(o.Voices(), aliases, !maps.Equal(aliases, pipeline.DefaultVoiceAliases))
	return err
}

// voiceSet returns what a speech request's voice may name in pipeline p.
// Until p is ready it is what the talker's driver describes; once it is,
// the voices its replicas name (a stage program names its own when it
// starts), found once.
func (s *Server) voiceSet(p *served) *voiceSet {
	if vs := p.voices.Load(); vs != nil {
		return vs
	}
	vs, err := newVoiceSet(p.orch.Voices(), p.cfg.VoiceAliases, false)
	if err != nil {
		panic("api: a voice set that is not strict cannot fail: " + err.Error())
	}
	if p.orch.Ready() {
		p.voices.CompareAndSwap(nil, vs)
	}
	return vs
}

// listVoices answers GET /v1/audio/voices: the voices of the pipeline
// ?model= names, the default one's without it.
func (s *Server) listVoices(w http.ResponseWriter, r *http.Request) {
	p, err := s.queryModel(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	httpbody.WriteJSON(w, http.StatusOK, s.voiceSet(p).list)
}
