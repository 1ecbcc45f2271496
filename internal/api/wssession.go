package api

// A speech stream session: its loop over the client's events, the
// utterances they make, and how the session ends.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/sessions"
)

// wsSession is one WebSocket session. Its loop (run) owns every field but
// out's and the relays' own: it reads the client's events from the reader
// goroutine, starts the relay of the utterance at the head of the queue
// once the one before it has ended (one relay at a time, so utterances
// are spoken in order), and ends the session.
type wsSession struct {
	s      *Server
	conn   *websocket.Conn
	out    *wsOut
	limits SpeechStreamLimits
	log    *slog.Logger
	ctx    context.Context // ends with the session
	stop   context.CancelFunc

	cfg     *wsConfig    // nil before the first session.config
	form    string       // word_timestamps_form unless session.config says (the URL's)
	queue   []*utterance // in order; the head's relay runs once started
	open    *utterance   // the utterance taking text (the queue's last), or nil
	next    int          // the index of the next utterance
	closing bool         // session.close came

	msgs     chan wsMessage
	readErr  chan error
	relayEnd chan relayResult
	// quiet fires when the open utterance's text has ended in a full stop
	// for its configuration's quiet time, with no more text.
	quiet *time.Timer
	// openLimit fires when the open utterance has taken text for
	// MaxUtteranceOpen.
	openLimit *time.Timer
	// slot is the session's place among the server's sessions; evicted is
	// closed when a new session takes it.
	slot    *sessions.Slot
	evicted chan struct{}
}

// wsMessage is one message of the client.
type wsMessage struct {
	typ  websocket.MessageType
	data []byte
}

// relayResult is how an utterance's relay ended.
type relayResult struct {
	u   *utterance
	err error
}

// wsEnd is how a session ends: the close status and reason, and whether
// the client is gone (no close handshake then).
type wsEnd struct {
	code   websocket.StatusCode
	reason string
	gone   bool
}

func newSession(s *Server, conn *websocket.Conn, limits SpeechStreamLimits) *wsSession {
	ss := &wsSession{s: s, conn: conn, limits: limits, log: s.log,
		out:  &wsOut{conn: conn, timeout: s.opts.ChunkWriteTimeout},
		msgs: make(chan wsMessage, 16), readErr: make(chan error, 1), relayEnd: make(chan relayResult, 1)}
	ss.ctx, ss.stop = context.WithCancel(context.Background())
	return ss
}

// run serves the session until it ends, and closes its connection.
func (ss *wsSession) run() {
	readCtx, stopRead := context.WithCancel(ss.ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		ss.read(readCtx)
	}()
	end := ss.loop()
	ss.halt()
	if end.gone || ss.out.broken() {
		_ = ss.conn.CloseNow()
	} else {
		_ = ss.conn.Close(end.code, end.reason)
	}
	stopRead()
	<-readDone
	ss.stop()
}

// read passes the client's messages to the loop until the connection
// fails or ctx ends.
func (ss *wsSession) read(ctx context.Context) {
	for {
		typ, data, err := ss.conn.Read(ctx)
		if err != nil {
			ss.readErr <- err
			return
		}
		select {
		case ss.msgs <- wsMessage{typ, data}:
		case <-ctx.Done():
			return
		}
	}
}

// loop handles events, relay ends and the session's limits until the
// session ends.
func (ss *wsSession) loop() wsEnd {
	idle := time.NewTimer(ss.limits.Idle)
	defer idle.Stop()
	ss.quiet = time.NewTimer(time.Hour)
	ss.quiet.Stop()
	defer ss.quiet.Stop()
	ss.openLimit = time.NewTimer(time.Hour)
	ss.openLimit.Stop()
	defer ss.openLimit.Stop()
	life := time.NewTimer(ss.limits.MaxLength)
	defer life.Stop()
	stopping := ss.s.sessions.Stopping().Done()
	for {
		ss.slot.Idle(len(ss.queue) == 0)
		select {
		case m := <-ss.msgs:
			idle.Reset(ss.limits.Idle)
			if end, ok := ss.handle(m); ok {
				return end
			}
		case err := <-ss.readErr:
			return ss.readFailed(err)
		case r := <-ss.relayEnd:
			idle.Reset(ss.limits.Idle)
			ss.ended(r)
			switch {
			case ss.out.broken():
				return wsEnd{gone: true}
			case ss.closing && len(ss.queue) == 0:
				return wsEnd{code: websocket.StatusNormalClosure, reason: "session closed"}
			}
		case <-idle.C:
			if ss.speaking() {
				idle.Reset(ss.limits.Idle)
				continue
			}
			return ss.fatal(httperr.Errorf(http.StatusRequestTimeout, httperr.CodeSessionTimeout,
				"no event came for %s: the session is closed (send input.text, or open a new session when there is more to say)", ss.limits.Idle),
				websocket.StatusPolicyViolation, "idle timeout")
		case <-life.C:
			return ss.fatal(httperr.Errorf(http.StatusRequestTimeout, httperr.CodeSessionTimeout,
				"the session reached its length limit of %s: open a new one", ss.limits.MaxLength),
				websocket.StatusPolicyViolation, "session length limit")
		case <-ss.openLimit.C:
			if u := ss.open; u != nil {
				_ = ss.out.event(u, errorEvent(httperr.Errorf(http.StatusRequestTimeout, httperr.CodeSessionTimeout,
					"utterance %d has taken text for %s without %s: it is ended here, its text so far spoken, and more text begins the next utterance", u.index, ss.limits.MaxUtteranceOpen, evDone), u.index))
				ss.done()
			}
		case <-ss.quiet.C:
			if u := ss.open; u != nil && u.text.endsInStop() {
				u.text.brkSentence()
			}
		case <-ss.evicted:
			return ss.fatal(httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeSessionEvicted,
				"the server holds its most sessions (%d), and this one, with no utterance in progress for the longest, was closed for a new one: open a session again when there is more to say", ss.limits.MaxSessions),
				websocket.StatusTryAgainLater, "closed for a new session")
		case <-stopping:
			return ss.fatal(httperr.Errorf(http.StatusServiceUnavailable, httperr.CodeNotReady, "server is shutting down"),
				websocket.StatusGoingAway, "server shutting down")
		}
	}
}

// speaking reports whether the server is sending audio of an utterance
// whose text is complete: the client has nothing to send meanwhile.
func (ss *wsSession) speaking() bool {
	if len(ss.queue) == 0 {
		return false
	}
	h := ss.queue[0]
	return h.started && !h.ended && h.inputDone
}

// readFailed ends the session whose connection failed or was closed.
func (ss *wsSession) readFailed(err error) wsEnd {
	if errors.Is(err, errFrameTooBig) {
		ss.cancelAll(false)
		_ = ss.out.event(nil, errorEvent(httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"a message longer than the session's limit of %d bytes was announced: the session is closed", ss.limits.MaxMessage), -1))
		return wsEnd{code: websocket.StatusMessageTooBig, reason: "message too big"}
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		// The library closed the connection with 1009 already.
		ss.log.Debug("speech stream: a message over the limit", "limit", ss.limits.MaxMessage)
	}
	return wsEnd{gone: true}
}

// handle handles one message; it returns how the session ends, if it does.
func (ss *wsSession) handle(m wsMessage) (wsEnd, bool) {
	if m.typ != websocket.MessageText {
		return ss.refuse(errNotJSONText)
	}
	typ, err := eventType(m.data)
	if err != nil {
		return ss.refuse(err)
	}
	if ss.cfg == nil && typ != evConfig {
		return ss.fatal(errConfigFirst, websocket.StatusPolicyViolation, "session.config must come first"), true
	}
	if ss.closing {
		return ss.refuse(httperr.BadRequest("%s was sent: the session takes no more events", evClose))
	}
	switch typ {
	case evConfig:
		return ss.configure(m.data)
	case evText:
		text, err := parseText(m.data)
		if err != nil {
			return ss.refuse(err)
		}
		return ss.text(text)
	case evDone, evCancel, evClose:
		if err := parseBare(m.data); err != nil {
			return ss.refuse(err)
		}
	default:
		return ss.refuse(httperr.BadRequest("unknown event type %q: send %s, %s, %s, %s or %s", quote.Short(typ), evConfig, evText, evDone, evCancel, evClose))
	}
	switch typ {
	case evDone:
		ss.done()
	case evCancel:
		ss.cancelAll(true)
	case evClose:
		ss.closing = true
		if ss.open != nil {
			ss.cancel(ss.open)
		}
		if len(ss.queue) == 0 {
			return wsEnd{code: websocket.StatusNormalClosure, reason: "session closed"}, true
		}
	}
	return ss.sent()
}

// sent is handle's answer once an event was handled: the session ends
// only if a write failed.
func (ss *wsSession) sent() (wsEnd, bool) {
	if ss.out.broken() {
		return wsEnd{gone: true}, true
	}
	return wsEnd{}, false
}

// refuse answers an event the session cannot take with an error event;
// the session goes on.
func (ss *wsSession) refuse(err error) (wsEnd, bool) {
	_ = ss.out.event(nil, errorEvent(err, -1))
	return ss.sent()
}

// fatal ends the session on err: every utterance still going is
// cancelled (each with its audio.cancelled), then the error event.
func (ss *wsSession) fatal(err error, code websocket.StatusCode, reason string) wsEnd {
	ss.cancelAll(false)
	_ = ss.out.event(nil, errorEvent(err, -1))
	return wsEnd{code: code, reason: reason}
}

// configure takes a session.config.
func (ss *wsSession) configure(msg []byte) (wsEnd, bool) {
	if ss.open != nil {
		return ss.refuse(errConfigOpen)
	}
	cfg, err := ss.s.parseConfig(msg, ss.form)
	switch {
	case err != nil && ss.cfg == nil:
		// As vLLM-Omni's: a session that could not start is closed.
		return ss.fatal(err, websocket.StatusPolicyViolation, "bad session.config"), true
	case err != nil:
		return ss.refuse(err)
	}
	ss.cfg = cfg
	return ss.sent()
}

// text takes an input.text: it begins an utterance unless one takes text.
func (ss *wsSession) text(text string) (wsEnd, bool) {
	if text == "" {
		return ss.sent()
	}
	u := ss.open
	if u != nil && u.err != nil {
		// The utterance failed (an error event said so): the rest of its
		// text is dropped until its input.done.
		return ss.sent()
	}
	waiting := 0
	for _, q := range ss.queue {
		waiting += q.text.waiting()
	}
	switch {
	case waiting+len(text) > ss.limits.MaxText:
		return ss.refuse(httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"%s refused: %d bytes of text would wait to be spoken, more than the session's limit of %d; send it again once audio has come", evText, waiting+len(text), ss.limits.MaxText))
	case u != nil && u.text.size()+len(text) > ss.limits.MaxUtteranceText:
		return ss.refuse(httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"%s refused: the utterance's text would be longer than the limit of %d bytes; send %s and go on in the next one", evText, ss.limits.MaxUtteranceText, evDone))
	case u == nil && len(ss.queue) >= ss.limits.MaxQueued:
		return ss.refuse(httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"%s refused: %d utterances already wait to be spoken, the session's limit; send more once one is done", evText, len(ss.queue)))
	}
	if u == nil {
		u = ss.begin()
	}
	u.text.add(text)
	ss.quiet.Stop()
	if u.cfg.quiet > 0 && u.cfg.split != splitNone && u.text.endsInStop() {
		ss.quiet.Reset(u.cfg.quiet)
	}
	ss.startNext()
	return ss.sent()
}

// begin opens the next utterance, with the session's configuration.
func (ss *wsSession) begin() *utterance {
	u := newUtterance(ss.ctx, ss.next, ss.cfg)
	ss.next++
	ss.queue = append(ss.queue, u)
	ss.open = u
	ss.openLimit.Reset(ss.limits.MaxUtteranceOpen)
	return u
}

// done takes an input.done: the open utterance's text is complete (with
// none open, an empty utterance is, which gets its session.done in turn).
func (ss *wsSession) done() {
	u := ss.open
	if u == nil {
		if len(ss.queue) >= ss.limits.MaxQueued {
			_ = ss.out.event(nil, errorEvent(httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
				"%s refused: %d utterances already wait to be spoken, the session's limit", evDone, len(ss.queue)), -1))
			return
		}
		u = ss.begin()
	}
	u.text.close()
	u.inputDone = true
	ss.open = nil
	if u.ended {
		ss.finish(u)
	}
	ss.startNext()
}

// startNext starts the relay of the queue's head once the one before it
// has ended; an empty utterance is done at once.
func (ss *wsSession) startNext() {
	for len(ss.queue) > 0 {
		h := ss.queue[0]
		if h.started {
			return
		}
		if h.inputDone && h.text.size() == 0 {
			ss.finish(h)
			continue
		}
		if h.cfg.split == splitNone && !h.inputDone {
			return // spoken whole, once input.done has come
		}
		h.started = true
		go func() {
			err := ss.relay(h)
			ss.relayEnd <- relayResult{h, err}
		}()
		return
	}
}

// ended takes the end of the head's relay.
func (ss *wsSession) ended(r relayResult) {
	u := r.u
	u.ended = true
	switch {
	case u.sent.cancelled:
		ss.remove(u)
	case r.err == nil || u.inputDone:
		ss.finish(u)
	default:
		// Failed with its text still coming: done at its input.done.
		u.err = r.err
		u.text.drop()
	}
	ss.startNext()
}

// finish ends utterance u with its session.done.
func (ss *wsSession) finish(u *utterance) {
	_ = ss.out.event(u, wsSessionDone{Type: evSessionDone, UtteranceIndex: u.index,
		TotalSentences: u.sent.sentences, TotalBytes: u.sent.bytes, RequestID: u.sent.requestID})
	ss.remove(u)
}

// remove takes u off the queue.
func (ss *wsSession) remove(u *utterance) {
	for i, q := range ss.queue {
		if q == u {
			ss.queue = append(ss.queue[:i], ss.queue[i+1:]...)
			break
		}
	}
	if ss.open == u {
		ss.open = nil
	}
	u.cancel()
}

// cancelAll cancels every utterance that is not done: each gets its
// audio.cancelled, and its text is dropped. With none to cancel and
// phantom set (an input.cancel), the next utterance's index is ended
// with an audio.cancelled of nothing, so that every input.cancel is
// answered.
func (ss *wsSession) cancelAll(phantom bool) {
	if len(ss.queue) == 0 {
		if phantom {
			u := newUtterance(ss.ctx, ss.next, ss.cfg)
			ss.next++
			_, _ = ss.out.cancelled(u)
			u.cancel()
		}
		return
	}
	for _, u := range append([]*utterance(nil), ss.queue...) {
		ss.cancel(u)
	}
}

// cancel stops utterance u: its audio.cancelled goes out after the audio
// message being written, its text is dropped and its request aborted (its
// relay ends soon after, freeing its stages; the next utterance waits for
// that).
func (ss *wsSession) cancel(u *utterance) {
	_, _ = ss.out.cancelled(u)
	u.text.drop()
	u.cancel()
	if !u.started || u.ended {
		ss.remove(u)
	} else if ss.open == u {
		ss.open = nil
	}
}

// halt ends every utterance without a word, and waits for the relay that
// runs, if any.
func (ss *wsSession) halt() {
	running := len(ss.queue) > 0 && ss.queue[0].started && !ss.queue[0].ended
	for _, u := range ss.queue {
		u.text.drop()
		u.cancel()
	}
	if running {
		<-ss.relayEnd
	}
	ss.queue, ss.open = nil, nil
}

// logFailure logs an utterance that failed: at warn when it is the
// server's fault.
func (ss *wsSession) logFailure(u *utterance, err error) {
	level := slog.LevelWarn
	if isClientError(err) {
		level = slog.LevelDebug
	}
	if ss.log.Enabled(context.Background(), level) {
		ss.log.LogAttrs(context.Background(), level, "speech stream: utterance failed", slog.Int("utterance", u.index), slog.Any("err", err))
	}
}
