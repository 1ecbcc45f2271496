package api

// The events of WS /v1/audio/speech/stream: what a client sends, what the
// server answers, and the checks of session.config.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/quote"
)

// The client's events, named as vLLM-Omni's streaming speech endpoint
// names them (input.cancel is omnistage's).
const (
	evConfig = "session.config"
	evText   = "input.text"
	evDone   = "input.done"
	evCancel = "input.cancel"
	evClose  = "session.close"
)

// The server's events (word_timestamps and audio.cancelled are
// omnistage's).
const (
	evAudioStart  = "audio.start"
	evAudioDone   = "audio.done"
	evAudioChunk  = "audio.chunk"
	evWords       = "word_timestamps"
	evCancelled   = "audio.cancelled"
	evSessionDone = "session.done"
	evError       = "error"
)

// wsDefaultFormat is a session's response_format when session.config
// names none, as vLLM-Omni's.
const wsDefaultFormat = encode.WAV

// wsFormats are the response formats a session may ask for. In pcm, wav,
// opus and flac each sentence's audio is a file of its own, made by the
// encoders of package encode as the samples come, that decodes to exactly
// the sentence's samples (Ogg Opus states its encoder's delay and its
// length). In mp3 and aac (utteranceWide) an utterance's audio is one
// stream, as HTTP streams it, cut into its sentences' messages: a file per
// sentence would put the encoder's delay and padding, silence that
// decoders keep, between the sentences (and start aac's ffmpeg once per
// sentence).
var wsFormats = []string{encode.PCM, encode.WAV, encode.Opus, encode.FLAC, encode.MP3, encode.AAC}

// utteranceWide reports whether format's audio is one stream per
// utterance (wsFormats).
func utteranceWide(format string) bool { return format == encode.MP3 || format == encode.AAC }

// The values of split_granularity, as vLLM-Omni's: how an utterance's text
// is cut into the units whose audio goes out on its own.
const (
	// splitSentence: at each sentence's end, as the talker finds it (the
	// default: live input is for hearing the first sentence while the
	// rest is being written, and the talker speaks every sentence of one
	// request, so the audio is that of the whole text).
	splitSentence = "sentence"
	// splitClause: at each clause's end too (a comma or semicolon, and
	// their CJK and Arabic forms, followed by white space): earlier audio,
	// each clause spoken as a sentence of its own.
	splitClause = "clause"
	// splitNone: nothing until input.done, then the whole utterance as one
	// unit, as vLLM-Omni's default.
	splitNone = "none"
)

// The values of word_timestamps_form.
const (
	// formEvents: audio in binary messages, the timestamps in
	// word_timestamps events on the utterance's timeline (omnistage's,
	// the default).
	formEvents = "word_timestamps"
	// formChunks: vLLM-Omni's: audio in audio.chunk events (base64), and
	// a sentence's timestamps, from its own start, in a last audio.chunk
	// of no audio before its audio.done; needs stream_audio and pcm.
	formChunks = "audio.chunk"
)

// wsConfigEvent is session.config. Besides the fields omnistage reads, it
// takes those of vLLM-Omni's that change nothing here, so that its clients
// work unchanged, and refuses those that ask for a voice cloned from
// reference audio.
type wsConfigEvent struct {
	Type           string        `json:"type"`
	Model          string        `json:"model"`
	Voice          apijson.Voice `json:"voice"`
	Speaker        apijson.Voice `json:"speaker"` // vLLM-Omni's other name for voice
	ResponseFormat string        `json:"response_format"`
	Speed          *float64      `json:"speed"`
	WordTimestamps bool          `json:"word_timestamps"`
	StreamAudio    bool          `json:"stream_audio"`
	// SentenceQuietMs is how long the client may fall quiet after a full
	// stop before its sentence is spoken though no next word came (0:
	// never; the next word decides).
	SentenceQuietMs *int `json:"sentence_quiet_ms"`
	// SplitGranularity is none, sentence (the default) or clause.
	SplitGranularity *string `json:"split_granularity"`
	// WordTimestampsForm is how word timestamps go out: word_timestamps
	// (the default, or the URL's word_timestamps_form) or audio.chunk.
	WordTimestampsForm *string `json:"word_timestamps_form"`

	// Taken and ignored: the talker's voice has no language, task or seed
	// to choose.
	Instructions            json.RawMessage `json:"instructions"`
	Language                json.RawMessage `json:"language"`
	TaskType                json.RawMessage `json:"task_type"`
	Seed                    json.RawMessage `json:"seed"`
	MaxNewTokens            json.RawMessage `json:"max_new_tokens"`
	InitialCodecChunkFrames json.RawMessage `json:"initial_codec_chunk_frames"`
	NonStreamingMode        json.RawMessage `json:"non_streaming_mode"`

	// Refused: voice cloning.
	RefAudio         json.RawMessage `json:"ref_audio"`
	RefText          json.RawMessage `json:"ref_text"`
	XVectorOnlyMode  json.RawMessage `json:"x_vector_only_mode"`
	SpeakerEmbedding json.RawMessage `json:"speaker_embedding"`
}

// wsTextEvent is input.text.
type wsTextEvent struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// wsBareEvent is input.done, input.cancel and session.close: a type and
// nothing else.
type wsBareEvent struct {
	Type string `json:"type"`
}

// wsConfig is a session's checked configuration: the pipeline, the audio
// format and what a request of it asks for. An utterance keeps the one it
// began with.
type wsConfig struct {
	pipeline   *served
	format     string
	stream     bool // stream_audio: a sentence's audio as it is made
	timestamps bool
	params     []json.RawMessage
	// quiet is how long text that ends in a full stop waits for more
	// before its sentence is spoken anyway (sentence_quiet_ms); 0: never.
	quiet time.Duration
	split string // split_granularity
	// chunks: the timestamps (and so the audio) go out in audio.chunk
	// events (word_timestamps_form audio.chunk, with word_timestamps).
	chunks bool
}

// MaxSentenceQuiet bounds sentence_quiet_ms.
const MaxSentenceQuiet = 10 * time.Second

// decodeEvent decodes the event msg strictly into dst.
func decodeEvent(msg []byte, dst any) error {
	return httperr.UnmarshalMessage("the event", msg, dst)
}

// eventType returns the type of the event msg, a JSON object.
func eventType(msg []byte) (string, error) {
	var ev struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(msg, &ev); err != nil {
		var fields map[string]json.RawMessage
		if err := decodeEvent(msg, &fields); err != nil {
			return "", err // its own words for why
		}
		return "", httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "field type: want a string, got a JSON %s", jsonKind(fields["type"]))
	}
	if ev.Type == nil || *ev.Type == "" {
		return "", httperr.BadRequest("the event has no type: send {\"type\": %q, ...} first, then %q, %q, %q or %q", evConfig, evText, evDone, evCancel, evClose)
	}
	return *ev.Type, nil
}

// jsonKind names the kind of the JSON value v, as encoding/json's errors
// do.
func jsonKind(v json.RawMessage) string {
	switch t := strings.TrimSpace(string(v)); {
	case t == "":
		return "nothing"
	case t[0] == '{':
		return "object"
	case t[0] == '[':
		return "array"
	case t[0] == '"':
		return "string"
	case t == "true" || t == "false":
		return "bool"
	case t == "null":
		return "null"
	}
	return "number"
}

// parseConfig checks a session.config event; form is the session's
// default word_timestamps_form.
func (s *Server) parseConfig(msg []byte, form string) (*wsConfig, error) {
	var ev wsConfigEvent
	if err := decodeEvent(msg, &ev); err != nil {
		return nil, err
	}
	for name, v := range map[string]json.RawMessage{"ref_audio": ev.RefAudio, "ref_text": ev.RefText, "x_vector_only_mode": ev.XVectorOnlyMode, "speaker_embedding": ev.SpeakerEmbedding} {
		if v != nil && string(v) != "null" {
			return nil, httperr.BadRequest("%s: this server does not clone voices; pick one of the model's voices with voice (GET /v1/audio/voices lists them)", name)
		}
	}
	p, err := s.textModel(ev.Model, false, "/v1/audio/speech/stream")
	if err != nil {
		return nil, err
	}
	if !p.cfg.Route.Produces(engine.KindAudio) {
		return nil, httperr.BadRequest("model %s makes no audio: pick a model that speaks", p.name)
	}
	c := &wsConfig{pipeline: p, format: strings.ToLower(ev.ResponseFormat), stream: ev.StreamAudio, timestamps: ev.WordTimestamps, quiet: engine.DefaultSentenceQuiet}
	if q := ev.SentenceQuietMs; q != nil {
		if *q < 0 || time.Duration(*q)*time.Millisecond > MaxSentenceQuiet {
			return nil, httperr.BadRequest("sentence_quiet_ms %d is outside 0..%d (0: a full stop waits for the next word)", *q, MaxSentenceQuiet.Milliseconds())
		}
		c.quiet = time.Duration(*q) * time.Millisecond
	}
	if c.format == "" {
		c.format = wsDefaultFormat
	}
	if c.split, err = oneOf("split_granularity", ev.SplitGranularity, splitSentence, splitSentence, splitClause, splitNone); err != nil {
		return nil, err
	}
	if ev.WordTimestampsForm != nil {
		form = *ev.WordTimestampsForm
	}
	if form, err = oneOf("word_timestamps_form", &form, formEvents, formEvents, formChunks); err != nil {
		return nil, err
	}
	if c.chunks = c.timestamps && form == formChunks; c.chunks && (!c.stream || c.format != encode.PCM) {
		return nil, httperr.BadRequest("word_timestamps_form %q rides on streamed pcm, as vLLM-Omni's: set stream_audio true and response_format pcm", formChunks)
	}
	if !slices.Contains(wsFormats, c.format) {
		return nil, httperr.BadRequest("response_format %q is not offered here: use %s (pcm is raw 16-bit little-endian mono at audio.start's sample_rate)", quote.Short(ev.ResponseFormat), strings.Join(wsFormats, ", "))
	}
	if err := encode.Available(c.format); err != nil {
		return nil, httperr.BadRequest("response_format %q is not available on this server: %v", c.format, err)
	}
	if c.timestamps && !slices.Contains(p.cfg.Route.Outputs(), string(engine.KindTimestamps)) {
		return nil, httperr.BadRequest("word_timestamps: model %s has no aligner, so no word timestamps; set word_timestamps false or pick a model that has them (GET /v1/models)", p.name)
	}
	var tp talker.Params
	voice := ev.Voice.ID
	switch {
	case voice != "" && ev.Speaker.ID != "" && !strings.EqualFold(voice, ev.Speaker.ID):
		return nil, httperr.BadRequest("voice %q and speaker %q disagree: send one of them", quote.Short(voice), quote.Short(ev.Speaker.ID))
	case voice == "":
		voice = ev.Speaker.ID
	}
	if voice != "" {
		if tp.Voice, err = resolveVoice(p, voice); err != nil {
			return nil, err
		}
	}
	if ev.Speed != nil {
		if !talker.SpeedOK(*ev.Speed) {
			return nil, httperr.BadRequest("speed %g is outside %g..%g", *ev.Speed, talker.MinSpeed, talker.MaxSpeed)
		}
		tp.Speed = ev.Speed
	}
	if c.params, err = tp.SamplingParams(p.cfg.Route.NumIDs()); err != nil {
		return nil, err
	}
	return c, nil
}

// oneOf returns *v, or def when v is nil or empty, checking that it is
// one of values.
func oneOf(field string, v *string, def string, values ...string) (string, error) {
	if v == nil || *v == "" {
		return def, nil
	}
	if !slices.Contains(values, *v) {
		return "", httperr.BadRequest("%s %q: use %s", field, quote.Short(*v), strings.Join(values, ", "))
	}
	return *v, nil
}

// modalities are what a request of c selects.
func (c *wsConfig) modalities() []string {
	if c.timestamps {
		return []string{string(engine.KindAudio), string(engine.KindTimestamps)}
	}
	return []string{string(engine.KindAudio)}
}

// parseText returns the text of an input.text event.
func parseText(msg []byte) (string, error) {
	var ev wsTextEvent
	if err := decodeEvent(msg, &ev); err != nil {
		return "", err
	}
	if ev.Text == nil {
		return "", httperr.BadRequest("%s has no text: send {\"type\": %q, \"text\": \"...\"}", evText, evText)
	}
	return *ev.Text, nil
}

// parseBare checks an event that carries nothing but its type.
func parseBare(msg []byte) error {
	var ev wsBareEvent
	return decodeEvent(msg, &ev)
}

// errNotJSONText is the answer to a binary message: events are JSON text.
var errNotJSONText = httperr.BadRequest("send each event as a JSON text message; binary messages are the server's audio")

// errConfigFirst is the answer to any event before the first session.config.
var errConfigFirst = httperr.BadRequest("send %s first: {\"type\": %q, \"model\": ..., \"voice\": ..., \"response_format\": \"pcm\"}", evConfig, evConfig)

// errConfigOpen is the answer to session.config while an utterance takes
// text.
var errConfigOpen = httperr.BadRequest("%s cannot change an utterance in progress: send %s (or %s) first; the new configuration applies from the next utterance", evConfig, evDone, evCancel)

// isClientError reports whether err is the client's fault (a 4xx).
func isClientError(err error) bool {
	status, _, _ := httperr.Classify(err)
	return status >= 400 && status < 500
}

// The server's events.

// wsAudioStart is audio.start: a sentence's audio begins (the binary
// messages that follow are its audio, until its audio.done).
type wsAudioStart struct {
	Type           string `json:"type"`
	UtteranceIndex int    `json:"utterance_index"`
	SentenceIndex  int    `json:"sentence_index"`
	SentenceText   string `json:"sentence_text"`
	Format         string `json:"format"`
	SampleRate     int    `json:"sample_rate"`
	Channels       int    `json:"channels"`
	RequestID      string `json:"request_id"`
	// WordTimestamps is set when the timestamps come in audio.chunk
	// events, as vLLM-Omni's says.
	WordTimestamps bool `json:"word_timestamps,omitempty"`
}

// wsAudioChunk is audio.chunk (vLLM-Omni's, with word_timestamps_form
// audio.chunk): a piece of a sentence's audio, 16-bit PCM in base64, its
// place from the sentence's start; or, after its audio, the sentence's
// word timestamps from its start (Timestamps), with no audio.
type wsAudioChunk struct {
	Type           string       `json:"type"`
	UtteranceIndex int          `json:"utterance_index"`
	SentenceIndex  int          `json:"sentence_index"`
	ChunkID        int          `json:"chunk_id"`
	ChunkStartMs   int          `json:"chunk_start_ms"`
	ChunkEndMs     int          `json:"chunk_end_ms"`
	SampleRate     int          `json:"sample_rate"`
	Channels       int          `json:"channels"`
	AudioB64       []byte       `json:"audio_b64"`
	Timestamps     *[]chunkWord `json:"timestamps"`
}

// chunkWord is a word of audio.chunk's timestamps, as vLLM-Omni's aligner
// gives them.
type chunkWord struct {
	Word    string `json:"word"`
	StartMs int    `json:"start_ms"`
	EndMs   int    `json:"end_ms"`
}

// wsAudioDone is audio.done: a sentence's audio is all sent.
type wsAudioDone struct {
	Type           string `json:"type"`
	UtteranceIndex int    `json:"utterance_index"`
	SentenceIndex  int    `json:"sentence_index"`
	TotalBytes     int64  `json:"total_bytes"`
	Error          bool   `json:"error"`
}

// wsWords is word_timestamps: words of one sentence, on the utterance's
// audio timeline, tied to the utterance's text by code point offsets.
type wsWords struct {
	Type           string        `json:"type"`
	UtteranceIndex int           `json:"utterance_index"`
	SentenceIndex  int           `json:"sentence_index"`
	Words          []engine.Word `json:"words"`
}

// wsSessionDone is session.done: an utterance is all spoken.
type wsSessionDone struct {
	Type           string `json:"type"`
	UtteranceIndex int    `json:"utterance_index"`
	TotalSentences int    `json:"total_sentences"`
	TotalBytes     int64  `json:"total_bytes"`
	RequestID      string `json:"request_id,omitempty"`
}

// wsCancelled is audio.cancelled: an utterance was stopped, and no audio
// of it follows. It says how much of it was sent, and the part of its text
// that audio fully covered, as far as the server can tell (wsHeard).
type wsCancelled struct {
	Type           string        `json:"type"`
	UtteranceIndex int           `json:"utterance_index"`
	SentenceIndex  int           `json:"sentence_index"`
	TotalBytes     int64         `json:"total_bytes"`
	AudioMs        int           `json:"audio_ms"`
	HeardCharEnd   int           `json:"heard_char_end"`
	HeardText      string        `json:"heard_text"`
	Words          []engine.Word `json:"words"`
	RequestID      string        `json:"request_id,omitempty"`
}

// wsError is error: a refused event, a failed utterance or the end of the
// session, with the code the HTTP API would give it.
type wsError struct {
	Type           string `json:"type"`
	Message        string `json:"message"`
	Code           string `json:"code"`
	UtteranceIndex *int   `json:"utterance_index,omitempty"`
}

// errorEvent returns err as an error event, about utterance u when u >= 0.
func errorEvent(err error, u int) wsError {
	_, _, code := httperr.Classify(err)
	ev := wsError{Type: evError, Message: err.Error(), Code: code}
	if u >= 0 {
		ev.UtteranceIndex = &u
	}
	return ev
}
