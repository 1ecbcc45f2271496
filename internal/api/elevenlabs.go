package api

// ElevenLabs' text-to-speech API, as agent frameworks' ElevenLabs plugins
// call it (LiveKit's @livekit/agents-plugin-elevenlabs, Pipecat's): its
// streaming-input WebSockets, its speech POSTs and its voice list, with
// this server's pipelines and voices. The paths, query parameters and
// messages are ElevenLabs'; xi-api-key carries the server's API key.

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/quote"
)

// The ElevenLabs paths.
const (
	elMultiPath  = "/v1/text-to-speech/{voice_id}/multi-stream-input"
	elSinglePath = "/v1/text-to-speech/{voice_id}/stream-input"
	elSpeechPath = "/v1/text-to-speech/{voice_id}"
	elStreamPath = "/v1/text-to-speech/{voice_id}/stream"
	elVoicesPath = "/v1/voices"
)

// routeElevenLabs is the metrics label of the ElevenLabs endpoints.
const routeElevenLabs = "elevenlabs"

// elKeyHeader is the header ElevenLabs' clients send their API key in.
const elKeyHeader = "xi-api-key"

// elDefaultInactivity and elMaxInactivity bound inactivity_timeout, in
// seconds, as ElevenLabs does.
const (
	elDefaultInactivity = 20
	elMaxInactivity     = 180
)

// elevenLabsEndpoints are the endpoint table's rows of the ElevenLabs API.
func (s *Server) elevenLabsEndpoints() []endpoint {
	rt := func(m methods, maxBody int64, types []string) route {
		return route{name: routeElevenLabs, methods: m, maxBody: maxBody, bodyTypes: types, keyHeader: elKeyHeader}
	}
	socket := func(single bool) route {
		r := rt(methods{http.MethodGet: func(w http.ResponseWriter, r *http.Request) { s.elSession(w, r, single) }}, 0, nil)
		r.socket = true
		return r
	}
	return []endpoint{
		{elMultiPath, socket(false)},
		{elSinglePath, socket(true)},
		{elSpeechPath, rt(methods{http.MethodPost: s.elSpeech}, s.opts.MaxBody, jsonBody)},
		{elStreamPath, rt(methods{http.MethodPost: s.elSpeech}, s.opts.MaxBody, jsonBody)},
		{elVoicesPath, rt(methods{http.MethodGet: s.elVoices}, 0, nil)},
	}
}

// elTarget is what an ElevenLabs request speaks with: the pipeline (the
// one model_id names, else the default: ElevenLabs' model ids name none
// here), the voice (voice_id: a voice or alias of the pipeline) and the
// output format.
type elTarget struct {
	pipeline *served
	voice    string
	format   elFormat
	stamps   bool // the pipeline has an aligner
}

// elTargetOf checks an ElevenLabs request's model, voice and format.
func (s *Server) elTargetOf(r *http.Request, model, format string) (*elTarget, error) {
	p := s.byName[model]
	if p == nil {
		p = s.def
	}
	if err := p.startErr.Load(); err != nil {
		return nil, p.notReady()
	}
	if p.cfg.Pipeline.Input != engine.KindText || !p.cfg.Route.Produces(engine.KindAudio) {
		return nil, httperr.BadRequest("model %s does not speak text: name a pipeline that does in model_id", p.name)
	}
	t := &elTarget{pipeline: p}
	var err error
	if t.voice, err = resolveVoice(p, r.PathValue("voice_id")); err != nil {
		return nil, err
	}
	if t.format, err = parseELFormat(format); err != nil {
		return nil, err
	}
	_, t.stamps = p.cfg.Route.Aligner()
	return t, nil
}

// params are the sampling params of a request of t, at speed (nil: the
// voice's own).
func (t *elTarget) params(speed *float64) ([]json.RawMessage, error) {
	tp := talker.Params{Voice: t.voice}
	if speed != nil {
		if !talker.SpeedOK(*speed) {
			return nil, httperr.BadRequest("voice_settings.speed %g is outside %g..%g", *speed, talker.MinSpeed, talker.MaxSpeed)
		}
		tp.Speed = speed
	}
	return tp.SamplingParams(t.pipeline.cfg.Route.NumIDs())
}

// elVoiceSettings are ElevenLabs' voice settings: speed is the talker's;
// the others have no counterpart here and are ignored.
type elVoiceSettings struct {
	Speed           *float64        `json:"speed"`
	Stability       json.RawMessage `json:"stability"`
	SimilarityBoost json.RawMessage `json:"similarity_boost"`
	Style           json.RawMessage `json:"style"`
	UseSpeakerBoost json.RawMessage `json:"use_speaker_boost"`
}

// elSpeechRequest is the body of POST /v1/text-to-speech/{voice_id}.
type elSpeechRequest struct {
	Text          string           `json:"text"`
	ModelID       string           `json:"model_id"`
	VoiceSettings *elVoiceSettings `json:"voice_settings"`
}

// elSpeech answers POST /v1/text-to-speech/{voice_id} and its /stream
// form alike: the audio, in ?output_format=, as the pipeline makes it.
func (s *Server) elSpeech(w http.ResponseWriter, r *http.Request) {
	var req elSpeechRequest
	if err := httperr.DecodeJSONLoose(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.elTargetOf(r, req.ModelID, cmp.Or(r.URL.Query().Get("output_format"), elDefaultSpeech))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		s.fail(w, r, httperr.BadRequest("text is missing or empty: send the text to speak"))
		return
	}
	var speed *float64
	if req.VoiceSettings != nil {
		speed = req.VoiceSettings.Speed
	}
	params, err := t.params(speed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := t.pipeline.orch.Submit(r.Context(), orchestrator.Request{Prompt: engine.Prompt{Text: req.Text},
		Modalities: []string{string(engine.KindAudio)}, Params: params})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	s.elRelaySpeech(w, r, st, t)
}

// elVoices answers GET /v1/voices: the default pipeline's voices and
// aliases, as ElevenLabs lists its own.
func (s *Server) elVoices(w http.ResponseWriter, r *http.Request) {
	type voice struct {
		VoiceID  string `json:"voice_id"`
		Name     string `json:"name"`
		Category string `json:"category"`
	}
	list := struct {
		Voices []voice `json:"voices"`
	}{Voices: []voice{}}
	for _, e := range s.def.voices.Set().Entries() {
		list.Voices = append(list.Voices, voice{VoiceID: e.ID, Name: e.Name, Category: "premade"})
	}
	httpbody.WriteJSON(w, http.StatusOK, list)
}

// elStreamQuery are the streaming-input WebSocket's query parameters that
// change something here; the others (enable_logging, enable_ssml_parsing,
// apply_text_normalization, language_code, auto_mode,
// optimize_streaming_latency) are taken and ignored.
type elStreamQuery struct {
	model, format string
	inactivity    time.Duration
	syncAlignment bool
}

// parseELStreamQuery checks the streaming-input WebSocket's query.
func parseELStreamQuery(r *http.Request) (elStreamQuery, error) {
	v := r.URL.Query()
	q := elStreamQuery{model: v.Get("model_id"), format: cmp.Or(v.Get("output_format"), elDefaultStream),
		inactivity: elDefaultInactivity * time.Second, syncAlignment: true}
	if s := v.Get("inactivity_timeout"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > elMaxInactivity {
			return q, httperr.BadRequest("inactivity_timeout %q: want 1 to %d seconds", quote.Short(s), elMaxInactivity)
		}
		q.inactivity = time.Duration(n) * time.Second
	}
	if s := v.Get("sync_alignment"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, httperr.BadRequest("sync_alignment %q: want true or false", quote.Short(s))
		}
		q.syncAlignment = b
	}
	return q, nil
}

// elRelaySpeech sends st's audio in t's format as it comes, in a chunked
// answer whose headers wait for the first audio (a request that fails
// before it gets an error status); a failure after them ends the answer
// with the X-Stream-Error trailer.
func (s *Server) elRelaySpeech(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream, t *elTarget) {
	body := s.newBodyWriter(w)
	defer body.Done()
	var enc *elEncoder
	defer func() { enc.free() }()
	fail := func(err error) {
		if enc == nil {
			s.fail(w, r, err)
			return
		}
		s.streamFailed(r, err)
		_, _, code := httperr.Classify(err)
		w.Header().Set(headerStreamError, code+": "+quote.Short(err.Error()))
	}
	send := func(b []byte, err error) error {
		if err != nil || len(b) == 0 {
			return err
		}
		if err := body.Send(b); err != nil {
			return sendError{err}
		}
		return nil
	}
	for {
		o, err := st.Recv(r.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		a := o.Chunk.Audio
		if a == nil {
			continue
		}
		if enc == nil {
			if enc, err = newELEncoder(t.format, a.SampleRate); err != nil {
				fail(err)
				return
			}
			w.Header().Set("Content-Type", t.format.contentType())
			w.Header().Set("Trailer", headerStreamError)
			w.WriteHeader(http.StatusOK)
		}
		if err := send(enc.write(a.Samples)); err != nil {
			fail(err)
			return
		}
	}
	if enc == nil {
		fail(errNoAudio)
		return
	}
	if err := send(enc.close()); err != nil {
		fail(err)
	}
}
