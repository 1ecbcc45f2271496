package wyoming

// The events the server reads and writes, the data of each, and its error
// codes.

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The event types the server knows. Every other type is ignored, as the
// protocol has it.
const (
	typeDescribe          = "describe"
	typeInfo              = "info"
	typeSynthesize        = "synthesize"
	typeSynthesizeStart   = "synthesize-start"
	typeSynthesizeChunk   = "synthesize-chunk"
	typeSynthesizeStop    = "synthesize-stop"
	typeSynthesizeStopped = "synthesize-stopped"
	typeAudioStart        = "audio-start"
	typeAudioChunk        = "audio-chunk"
	typeAudioStop         = "audio-stop"
	typePing              = "ping"
	typePong              = "pong"
	typeError             = "error"
)

// The codes of the server's own error events. A synthesis that the
// pipeline refuses or fails has the code the HTTP API gives the same
// failure (httperr.Classify: bad_request, overloaded, unavailable,
// replica_lost, ...).
const (
	CodeMalformed          = "malformed_event"      // an event that cannot be read, or whose data does not fit its type
	CodeUnexpected         = "unexpected_event"     // an event out of its place: a synthesize-chunk outside a stream, a second synthesize-start
	CodeUnknownVoice       = "unknown_voice"        // a voice (or a language) no pipeline served here speaks
	CodeTextTooLong        = "text_too_long"        // a synthesis's text is over the limit
	CodeIdle               = "idle_timeout"         // no event came for the idle timeout
	CodeSessionLimit       = "session_limit"        // the connection reached its longest life
	CodeTooManyConnections = "too_many_connections" // the server holds its most connections
	CodeShuttingDown       = "shutting_down"        // the server is stopping
	CodeStreamLimit        = "stream_limit"         // a stream took text for its longest without synthesize-stop
	CodeForbiddenPeer      = "forbidden_peer"       // the connection comes from a network the server does not serve
)

// Width and Channels are those of all the audio the server sends: 16-bit
// mono PCM, little-endian.
const (
	Width    = 2
	Channels = 1
)

// errorData is an error event's data.
type errorData struct {
	Text string `json:"text"`
	Code string `json:"code,omitempty"`
}

// pingData is a ping's and its pong's data.
type pingData struct {
	Text *string `json:"text"`
}

// voiceRef is the voice a synthesize or synthesize-start asks for: by
// name, or by language; the speaker is ignored (no voice served here has
// several).
type voiceRef struct {
	Name     string
	Language string
}

// synthesizeData is a synthesize event's data, or (without Text) a
// synthesize-start's.
type synthesizeData struct {
	Text  string
	Voice voiceRef
}

// parseSynthesize reads a synthesize event's data (withText) or a
// synthesize-start's: text a string (required with withText), voice
// absent, null or an object whose name and language are strings.
func parseSynthesize(ev event, withText bool) (synthesizeData, error) {
	var d synthesizeData
	if withText {
		if err := stringField(ev, ev.Data, "text", &d.Text, true); err != nil {
			return d, err
		}
	}
	raw := ev.Data["voice"]
	if len(raw) == 0 || string(raw) == "null" {
		return d, nil
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return d, malformed("%s event: voice is not an object", ev.Type)
	}
	if err := stringField(ev, v, "name", &d.Voice.Name, false); err != nil {
		return d, err
	}
	return d, stringField(ev, v, "language", &d.Voice.Language, false)
}

// parseChunk reads a synthesize-chunk's text.
func parseChunk(ev event) (string, error) {
	var text string
	return text, stringField(ev, ev.Data, "text", &text, true)
}

// stringField reads m[name] into dst: a string, or absent or null when not
// required.
func stringField(ev event, m map[string]json.RawMessage, name string, dst *string, required bool) error {
	raw := m[name]
	if len(raw) == 0 || string(raw) == "null" {
		if required {
			return malformed("%s event: %s is missing (a string)", ev.Type, name)
		}
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return malformed("%s event: %s is not a string", ev.Type, name)
	}
	return nil
}

// protocolError is an event the server answers with an error event and
// then goes on without: the event is as if it had not come.
type protocolError struct {
	code, msg string
}

func (e *protocolError) Error() string { return e.msg }

func malformed(format string, args ...any) *protocolError {
	return &protocolError{code: CodeMalformed, msg: fmt.Sprintf(format, args...)}
}

func unexpected(format string, args ...any) *protocolError {
	return &protocolError{code: CodeUnexpected, msg: fmt.Sprintf(format, args...)}
}

// appendAudioData appends an audio-start's or audio-chunk's data: the
// format, and the timestamp in milliseconds when not negative.
func appendAudioData(b []byte, rate int, timestampMs int64) []byte {
	b = append(b, `{"rate":`...)
	b = strconv.AppendInt(b, int64(rate), 10)
	b = append(b, `,"width":`+strconv.Itoa(Width)+`,"channels":`+strconv.Itoa(Channels)...)
	if timestampMs >= 0 {
		b = append(b, `,"timestamp":`...)
		b = strconv.AppendInt(b, timestampMs, 10)
	}
	return append(b, '}')
}

// attribution says who made a program or a voice.
type attribution struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// ttsVoice is one voice of the info event's program.
type ttsVoice struct {
	Name        string      `json:"name"`
	Attribution attribution `json:"attribution"`
	Installed   bool        `json:"installed"`
	Description string      `json:"description,omitempty"`
	Version     *string     `json:"version"`
	Languages   []string    `json:"languages"`
}

// ttsProgram is the info event's one text-to-speech program.
type ttsProgram struct {
	Name                        string      `json:"name"`
	Attribution                 attribution `json:"attribution"`
	Installed                   bool        `json:"installed"`
	Description                 string      `json:"description,omitempty"`
	Version                     *string     `json:"version"`
	Voices                      []ttsVoice  `json:"voices"`
	SupportsSynthesizeStreaming bool        `json:"supports_synthesize_streaming"`
}

// infoData is the info event's data: the one program, and none of the
// other services a Wyoming server may offer.
type infoData struct {
	ASR    []struct{}   `json:"asr"`
	TTS    []ttsProgram `json:"tts"`
	Handle []struct{}   `json:"handle"`
	Intent []struct{}   `json:"intent"`
	Wake   []struct{}   `json:"wake"`
	Mic    []struct{}   `json:"mic"`
	Snd    []struct{}   `json:"snd"`
}
