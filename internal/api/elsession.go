package api

// ElevenLabs' streaming-input WebSockets: multi-stream-input, whose
// contexts (context_id) each speak a text that arrives in pieces, and
// stream-input, one such text per connection. A session's loop reads the
// client's messages and ends the session; each context's relay
// (elcontext.go) sends its audio.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/sessions"
)

// elMaxContexts bounds the contexts a connection has open at once, as
// ElevenLabs does.
const elMaxContexts = 5

// elMessage is a client's message, of any kind: a context's first
// (text " ", voice_settings), its text (text, flush), a flush alone, its
// close (close_context), the socket's close (close_socket). Fields of
// ElevenLabs' that change nothing here are ignored.
type elMessage struct {
	Text          *string          `json:"text"`
	ContextID     string           `json:"context_id"`
	Flush         bool             `json:"flush"`
	CloseContext  bool             `json:"close_context"`
	CloseSocket   bool             `json:"close_socket"`
	VoiceSettings *elVoiceSettings `json:"voice_settings"`
}

// elOut is a message of the server: audio (base64), its alignment, or a
// context's end (isFinal), for a context (contextId, omitted on
// stream-input).
type elOut struct {
	Audio               *[]byte      `json:"audio"`
	IsFinal             *bool        `json:"isFinal"`
	NormalizedAlignment *elAlignment `json:"normalizedAlignment"`
	Alignment           *elAlignment `json:"alignment"`
	ContextID           *string      `json:"contextId,omitempty"`
}

// elAlignment is the characters of a piece of the text, each with its
// start and duration in ms from the start of its context's audio.
type elAlignment struct {
	Chars            []string `json:"chars"`
	CharStartTimesMs []int    `json:"charStartTimesMs"`
	CharDurationsMs  []int    `json:"charDurationsMs"`
}

// elErrorOut is an error message: error is the API's code, message what
// went wrong.
type elErrorOut struct {
	Error     string  `json:"error"`
	Message   string  `json:"message"`
	ContextID *string `json:"contextId,omitempty"`
}

// elSession is one streaming-input connection.
type elSession struct {
	s      *Server
	conn   *websocket.Conn
	out    *wsOut
	t      *elTarget
	q      elStreamQuery
	single bool // stream-input: one context, no context ids
	limits SpeechStreamLimits
	ctx    context.Context
	stop   context.CancelFunc

	contexts map[string]*elContext // taking text or speaking
	closing  bool                  // close_socket came, or stream-input's end
	msgs     chan wsMessage
	readErr  chan error
	ended    chan *elContext
	slot     *sessions.Slot
	evicted  chan struct{}
}

// elSession upgrades to a streaming-input session; single is stream-input.
func (s *Server) elSession(w http.ResponseWriter, r *http.Request, single bool) {
	if err := checkUpgrade(r); err != nil {
		w.Header().Set("Upgrade", "websocket")
		s.fail(w, r, err)
		return
	}
	q, err := parseELStreamQuery(r)
	if err == nil {
		var t *elTarget
		if t, err = s.elTargetOf(r, q.model, q.format); err == nil {
			s.elServe(w, r, &elSession{s: s, t: t, q: q, single: single})
			return
		}
	}
	s.fail(w, r, err)
}

// elServe accepts the session's connection and runs it, within the
// server's sessions as the speech stream's are.
func (s *Server) elServe(w http.ResponseWriter, r *http.Request, es *elSession) {
	a, ok := s.admitSession(w, r, nil, "elevenlabs")
	if !ok {
		return
	}
	defer a.done()
	es.conn, es.limits, es.slot, es.evicted = a.conn, a.limits, a.slot, a.evicted
	es.out = &wsOut{conn: a.conn, timeout: s.opts.ChunkWriteTimeout}
	es.contexts = map[string]*elContext{}
	es.msgs, es.readErr, es.ended = make(chan wsMessage, 16), make(chan error, 1), make(chan *elContext, elMaxContexts)
	es.ctx, es.stop = context.WithCancel(context.Background())
	es.run()
}

// run serves the session until it ends, and closes its connection.
func (es *elSession) run() {
	// Not es.ctx's: cancelling a read closes the connection, which must
	// first be closed with its status, after the contexts have ended.
	readCtx, stopRead := context.WithCancel(context.Background())
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			typ, data, err := es.conn.Read(readCtx)
			if err != nil {
				es.readErr <- err
				return
			}
			select {
			case es.msgs <- wsMessage{typ, data}:
			case <-readCtx.Done():
				return
			}
		}
	}()
	code, reason := es.loop()
	es.stop() // cancels the contexts still speaking
	for _, c := range es.contexts {
		if c.began { // its relay, or its isFinal, runs
			<-es.ended
		}
	}
	if code == 0 || es.out.broken() {
		_ = es.conn.CloseNow()
	} else {
		_ = es.conn.Close(code, reason)
	}
	stopRead()
	<-readDone
}

// loop handles messages, contexts' ends and the session's limits until
// the session ends; it returns the close status (0: the client is gone).
func (es *elSession) loop() (websocket.StatusCode, string) {
	idle := time.NewTimer(es.q.inactivity)
	defer idle.Stop()
	life := time.NewTimer(es.limits.MaxLength)
	defer life.Stop()
	stopping := es.s.sessions.Stopping().Done()
	for {
		es.slot.Idle(len(es.contexts) == 0)
		if es.closing && len(es.contexts) == 0 {
			return websocket.StatusNormalClosure, "done"
		}
		select {
		case m := <-es.msgs:
			idle.Reset(es.q.inactivity)
			if err := es.handle(m); err != nil {
				es.fail(nil, err)
			}
			if es.out.broken() {
				return 0, ""
			}
		case err := <-es.readErr:
			if errors.Is(err, errFrameTooBig) {
				es.fail(nil, httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge, "a message longer than the limit of %d bytes was announced", es.limits.MaxMessage))
				return websocket.StatusMessageTooBig, "message too big"
			}
			return 0, ""
		case c := <-es.ended:
			delete(es.contexts, c.id)
			if es.single {
				es.closing = true
			}
		case <-idle.C:
			if es.speaking() {
				idle.Reset(es.q.inactivity)
				continue
			}
			es.fail(nil, httperr.Errorf(http.StatusRequestTimeout, httperr.CodeSessionTimeout, "no message came for %s (inactivity_timeout): the connection is closed", es.q.inactivity))
			return websocket.StatusPolicyViolation, "input timeout exceeded"
		case <-life.C:
			es.fail(nil, httperr.Errorf(http.StatusRequestTimeout, httperr.CodeSessionTimeout, "the connection reached its length limit of %s: open a new one", es.limits.MaxLength))
			return websocket.StatusPolicyViolation, "session length limit"
		case <-es.evicted:
			es.fail(nil, httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeSessionEvicted, "the server holds its most sessions (%d), and this one, speaking nothing for the longest, was closed for a new one", es.limits.MaxSessions))
			return websocket.StatusTryAgainLater, "closed for a new session"
		case <-stopping:
			es.fail(nil, httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "server is shutting down"))
			return websocket.StatusGoingAway, "server shutting down"
		}
	}
}

// speaking reports whether a context whose text is complete is still
// being spoken: the client has nothing to send meanwhile.
func (es *elSession) speaking() bool {
	for _, c := range es.contexts {
		if c.inputDone {
			return true
		}
	}
	return false
}

// handle handles one message; an error it returns is the client's,
// answered with an error message, and the session goes on.
func (es *elSession) handle(m wsMessage) error {
	if m.typ != websocket.MessageText {
		return httperr.BadRequest("send each message as JSON text")
	}
	var msg elMessage
	if err := json.Unmarshal(m.data, &msg); err != nil {
		return httperr.UnmarshalMessage("the message", m.data, &msg)
	}
	if es.single {
		msg.ContextID = ""
	}
	c := es.contexts[msg.ContextID]
	switch {
	case msg.CloseSocket:
		es.closing = true
		for _, c := range es.contexts {
			c.close()
		}
		return nil
	case es.closing:
		return httperr.BadRequest("the socket is closing: it takes no more text")
	case msg.CloseContext:
		if c == nil {
			return httperr.BadRequest("close_context: no context %q is open", msg.ContextID)
		}
		c.close()
		return nil
	case c == nil && msg.Text == nil:
		return httperr.BadRequest("no context %q is open: its first message carries text (\" \")", msg.ContextID)
	case c == nil:
		var err error
		if c, err = es.open(msg); err != nil {
			return err
		}
	}
	if msg.Text != nil {
		if es.single && *msg.Text == "" && c.began {
			c.close() // stream-input: the end of the text
			return nil
		}
		if err := c.add(*msg.Text); err != nil {
			return err
		}
	}
	if msg.Flush {
		c.flush()
	}
	return nil
}

// open opens the context of msg, its first message.
func (es *elSession) open(msg elMessage) (*elContext, error) {
	if len(es.contexts) >= elMaxContexts {
		return nil, httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"%d contexts are open, the most a connection may have: close one first", elMaxContexts)
	}
	var speed *float64
	if msg.VoiceSettings != nil {
		speed = msg.VoiceSettings.Speed
	}
	params, err := es.t.params(speed)
	if err != nil {
		return nil, err
	}
	c := newELContext(es, msg.ContextID, params)
	es.contexts[c.id] = c
	return c, nil
}

// fail sends err as an error message, of context id (nil: of the
// session).
func (es *elSession) fail(id *string, err error) {
	_, _, code := httperr.Classify(err)
	if es.single {
		id = nil
	}
	_ = es.out.event(nil, elErrorOut{Error: code, Message: err.Error(), ContextID: id})
}

// idOf is the contextId of a message of context id: none on stream-input.
func (es *elSession) idOf(id string) *string {
	if es.single {
		return nil
	}
	return &id
}

// blank reports whether text is white space alone.
func blank(text string) bool { return strings.TrimSpace(text) == "" }
