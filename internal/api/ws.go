package api

// WS /v1/audio/speech/stream: the upgrade (its checks, the API key of a
// browser, which cannot set headers on a WebSocket), the session limits,
// and the sessions a server has open, which its shutdown ends.

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/defaults"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/sessions"
)

// routeSpeechStream is the metrics label of the speech stream.
const routeSpeechStream = "speech_stream"

// speechStreamPath is the endpoint's path.
const speechStreamPath = "/v1/audio/speech/stream"

// WSProtocol is the WebSocket subprotocol the endpoint selects when a
// client offers it; a browser that sends its API key as a subprotocol
// (WSKeyProtocol) must offer it too, since a browser fails a connection
// whose server selects none of the subprotocols it offered.
const WSProtocol = "omnistage"

// WSKeyProtocol begins the subprotocol that carries the API key of a
// client that cannot set an Authorization header (a browser's WebSocket):
// WSKeyProtocol + the key in unpadded base64url, as Kubernetes takes a
// bearer token from "base64url.bearer.authorization.k8s.io.". It is
// never selected, so the key is not sent back; the query string is not
// used, since URLs end up in logs.
const WSKeyProtocol = "base64url.bearer.omnistage."

// Defaults of SpeechStreamLimits.
const (
	DefaultStreamIdle             = 60 * time.Second
	DefaultStreamMaxLength        = time.Hour
	DefaultStreamMaxText          = 64 << 10
	DefaultStreamMaxUtteranceText = 1 << 20
	DefaultStreamMaxQueued        = 16
	DefaultStreamMaxMessage       = 256 << 10
	DefaultStreamMaxSessions      = 256
	DefaultStreamMaxUtteranceOpen = 2 * time.Minute
)

// SpeechStreamLimits bound the sessions of WS /v1/audio/speech/stream; a
// zero field takes its default. Audio queued to a client that reads
// slowly is bounded by the pipeline's stream buffer and one message: the
// session writes each message as the pipeline makes it, and waits while
// the client does not read (for at most Options.ChunkWriteTimeout), which
// holds back the pipeline.
type SpeechStreamLimits struct {
	// Idle ends a session when no event comes for that long, unless the
	// server is still speaking an utterance whose text is complete.
	Idle time.Duration
	// MaxLength ends a session that long after it began.
	MaxLength time.Duration
	// MaxText bounds the text waiting to be spoken (received, not yet
	// taken by the talker), in bytes: an input.text past it is refused.
	MaxText int
	// MaxUtteranceText bounds one utterance's text, in bytes.
	MaxUtteranceText int
	// MaxUtteranceOpen bounds the time from an utterance's first text to
	// its input.done, for which it holds its request's admission slots:
	// past it, the utterance is ended as input.done would (its text so
	// far is spoken), after an error event.
	MaxUtteranceOpen time.Duration
	// MaxQueued bounds the utterances waiting for the one being spoken.
	MaxQueued int
	// MaxMessage bounds one message of the client, in bytes: past it the
	// connection is closed with status 1009.
	MaxMessage int64
	// MaxSessions bounds the sessions open at once. They do not count
	// among Options.MaxConns (a session is no HTTP connection once it has
	// begun); a new one past the bound takes the place of the session
	// with no utterance in progress for the longest (at least
	// sessions.EvictGrace), which is closed with status 1013, and is
	// refused (503 overloaded) when every session is speaking.
	MaxSessions int
}

func (l SpeechStreamLimits) withDefaults() SpeechStreamLimits {
	defaults.Set(&l.Idle, DefaultStreamIdle)
	defaults.Set(&l.MaxLength, DefaultStreamMaxLength)
	defaults.Set(&l.MaxText, DefaultStreamMaxText)
	defaults.Set(&l.MaxUtteranceText, DefaultStreamMaxUtteranceText)
	defaults.Set(&l.MaxQueued, DefaultStreamMaxQueued)
	defaults.Set(&l.MaxMessage, DefaultStreamMaxMessage)
	defaults.Set(&l.MaxSessions, DefaultStreamMaxSessions)
	defaults.Set(&l.MaxUtteranceOpen, DefaultStreamMaxUtteranceOpen)
	return l
}

// speechStreamEndpoint is the endpoint table's row of the speech stream:
// a GET that upgrades, behind the cross-site checks and the API key (which
// it also takes as a subprotocol).
func (s *Server) speechStreamEndpoint() endpoint {
	return endpoint{speechStreamPath, route{name: routeSpeechStream, keyProtocol: true, socket: true, methods: methods{http.MethodGet: s.speechSession}}}
}

// speechSession upgrades to a session. The route has checked the Host, the
// Origin (as for every route: a page of another site cannot open a
// session, and CORS does not protect WebSockets) and the API key.
func (s *Server) speechSession(w http.ResponseWriter, r *http.Request) {
	if err := checkUpgrade(r); err != nil {
		w.Header().Set("Upgrade", "websocket")
		s.fail(w, r, err)
		return
	}
	if _, keyed := protocolKey(r); keyed && !slices.Contains(offeredProtocols(r), WSProtocol) {
		s.fail(w, r, httperr.BadRequest("a client that sends its API key as the subprotocol %s... must also offer the subprotocol %q, which the server selects", WSKeyProtocol, WSProtocol))
		return
	}
	form := cmp.Or(r.URL.Query().Get("word_timestamps_form"), formEvents)
	if form != formEvents && form != formChunks {
		s.fail(w, r, httperr.BadRequest("word_timestamps_form %q: use %s or %s", quote.Short(form), formEvents, formChunks))
		return
	}
	a, ok := s.admitSession(w, r, []string{WSProtocol}, "speech stream")
	if !ok {
		return
	}
	defer a.done()
	ss := newSession(s, a.conn, a.limits)
	ss.slot, ss.evicted, ss.form = a.slot, a.evicted, form
	ss.run()
}

// admission is a streaming WebSocket session's place on the server: its
// connection, its limits and its slot among the sessions, which evicted
// closes to end it; done gives them back when the session ends.
type admission struct {
	conn    *websocket.Conn
	limits  SpeechStreamLimits
	slot    *sessions.Slot
	evicted chan struct{}
	done    func()
}

// admitSession admits a streaming WebSocket session (the speech stream's,
// ElevenLabs'), named what in the log, among the server's sessions and
// within their limit, and accepts its connection, selecting one of
// protocols. When it cannot, it has answered the request and ok is false.
func (s *Server) admitSession(w http.ResponseWriter, r *http.Request, protocols []string, what string) (a admission, ok bool) {
	if s.draining.Load() || !s.sessions.add(r) {
		s.fail(w, r, httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "server is shutting down"))
		return a, false
	}
	a.limits = s.opts.SpeechStream.withDefaults()
	a.evicted = make(chan struct{})
	slot, ok := s.sessions.limit.Take(func() { close(a.evicted) })
	if !ok {
		s.sessions.Done()
		s.fail(w, r, httperr.Errorf(http.StatusServiceUnavailable, string(orchestrator.CodeOverloaded),
			"the server holds its most streaming sessions (%d), every one with an utterance in progress; retry later", a.limits.MaxSessions))
		return a, false
	}
	a.slot = slot
	a.done = func() {
		slot.Release()
		s.sessions.Done()
	}
	// A frame header that announces a message past the bound ends the
	// session at once (wsframe.go), not once its payload has come.
	conn, err := websocket.Accept(&guardedWriter{ResponseWriter: w, limit: a.limits.MaxMessage}, r, &websocket.AcceptOptions{
		Subprotocols: protocols,
		// checkSite has checked the Origin, with the server's own rules
		// (its own origin, or --cors-origins).
		InsecureSkipVerify: true,
	})
	if err != nil {
		a.done()
		s.log.Debug(what+": upgrade failed", "err", err)
		return a, false
	}
	conn.SetReadLimit(a.limits.MaxMessage)
	a.conn = conn
	return a, true
}

// refuse answers a request that rt's checks refuse with err. A browser's
// WebSocket handshake (one with an Origin) that a WebSocket endpoint
// refuses is completed, then closed at once with status 1008 and the
// error's code and message as the reason: a browser shows a refused
// handshake only as a failed connection, its status and body hidden from
// the page, while a close's reason reaches it (CloseEvent.reason). Nothing
// is read from such a connection: it does what a refusal does.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, rt route, err error) {
	if !rt.socket || r.Header.Get("Origin") == "" || checkUpgrade(r) != nil {
		s.fail(w, r, err)
		return
	}
	// A browser fails a connection whose server selects none of the
	// subprotocols it offered; never the one carrying a key.
	var protocols []string
	for _, p := range offeredProtocols(r) {
		if !strings.HasPrefix(p, WSKeyProtocol) {
			protocols = append(protocols, p)
		}
	}
	conn, aerr := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protocols, InsecureSkipVerify: true})
	if aerr != nil {
		return
	}
	_, _, code := httperr.Classify(err)
	reason := code + ": " + err.Error()
	if len(reason) > 123 { // a close frame's reason holds at most 123 bytes
		reason = strings.ToValidUTF8(reason[:120], "") + "..."
	}
	s.log.Debug("websocket refused after its handshake", "code", code, "err", err)
	_ = conn.Close(websocket.StatusPolicyViolation, reason)
}

// checkUpgrade refuses a request that is not a WebSocket opening
// handshake, in the API's error shape (what websocket.Accept would answer
// in plain text).
func checkUpgrade(r *http.Request) error {
	switch {
	case !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket"):
		return httperr.Errorf(http.StatusUpgradeRequired, httperr.CodeWebSocketRequired,
			"GET %s is a WebSocket endpoint: connect with a WebSocket client (HTTP/1.1, Connection: Upgrade, Upgrade: websocket)", speechStreamPath)
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return httperr.BadRequest("Sec-WebSocket-Version %q: only version 13 is served", quote.Short(r.Header.Get("Sec-WebSocket-Version")))
	case len(r.Header.Values("Sec-WebSocket-Key")) != 1:
		return httperr.BadRequest("the WebSocket handshake needs one Sec-WebSocket-Key header")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.Header.Get("Sec-WebSocket-Key")))
	if err != nil || len(key) != 16 {
		return httperr.BadRequest("Sec-WebSocket-Key is not 16 bytes in base64")
	}
	return nil
}

// headerHas reports whether the comma-separated tokens of header name
// hold token, in any case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// offeredProtocols returns the subprotocols a handshake offers.
func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// protocolKey returns the API key a handshake offers as a subprotocol
// (WSKeyProtocol), and whether it offers one.
func protocolKey(r *http.Request) (string, bool) {
	for _, p := range offeredProtocols(r) {
		if enc, ok := strings.CutPrefix(p, WSKeyProtocol); ok {
			key, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil {
				return "", true
			}
			return string(key), true
		}
	}
	return "", false
}

// checkProtocolKey checks the API key of a handshake that sends it as a
// subprotocol, in constant time, as checkKey does a bearer token.
func (s *Server) checkProtocolKey(r *http.Request) error {
	key, _ := protocolKey(r)
	if strings.TrimSpace(key) == "" {
		return httperr.Errorf(http.StatusUnauthorized, httperr.CodeInvalidAPIKey, "the API key subprotocol holds no key: offer %s followed by the key in unpadded base64url", WSKeyProtocol)
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(key)))
	if subtle.ConstantTimeCompare(got[:], s.keyHash[:]) != 1 {
		return httperr.Errorf(http.StatusUnauthorized, httperr.CodeInvalidAPIKey, "incorrect API key")
	}
	return nil
}

// wsSessions are the sessions a server has open. A server's shutdown
// (http.Server.Shutdown, which does not wait for upgraded connections)
// tells them to end, and Run waits for them (sessions.Group.Drain).
type wsSessions struct {
	*sessions.Group
	limit   *sessions.Limit // SpeechStreamLimits.MaxSessions
	mu      sync.Mutex
	watched map[*http.Server]bool
}

// add counts a new session, and has the shutdown of the http.Server that
// serves r end it; false once the sessions are stopping.
func (ws *wsSessions) add(r *http.Request) bool {
	ws.mu.Lock()
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && !ws.watched[hs] {
		if ws.watched == nil {
			ws.watched = map[*http.Server]bool{}
		}
		ws.watched[hs] = true
		hs.RegisterOnShutdown(ws.Stop)
	}
	ws.mu.Unlock()
	return ws.Add()
}
