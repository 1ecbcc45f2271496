package wyoming

// One connection: its events read in turn and answered, its deadlines,
// and its end.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnistage/omnistage/internal/sessions"
)

// The ends of a session that are not the client's doing.
var (
	errIdle         = errors.New("idle")
	errSessionLimit = errors.New("session limit")
	errShuttingDown = errors.New("shutting down")
	errHardStop     = errors.New("the server stopped")
	errEvicted      = errors.New("evicted for a new connection")
	errEnded        = errors.New("the connection ended")
	// errFailed ends a session whose synthesis failed: its error event is
	// sent, and the client waiting for the synthesis's end learns of it
	// when the connection closes.
	errFailed = errors.New("synthesis failed")
)

// session is one connection.
type session struct {
	srv  *Server
	conn net.Conn
	r    *reader
	w    *writer
	log  *slog.Logger

	// ctx ends when the session does, at its limit (errSessionLimit), or
	// at the server's hard stop; a synthesis's request is submitted under
	// it, so it is aborted then.
	ctx    context.Context
	cancel context.CancelCauseFunc

	// mu orders setting the read deadline before a read against wake.
	mu sync.Mutex

	// stream is the stream under way (synthesize-start to -stop); only the
	// session's goroutine reads or writes it.
	stream *stream
	// framed is whether the last event read was framed well: a
	// connection gets an error event for one malformed line, but one
	// whose first line, or whose line after a malformed one, is malformed
	// too is closed (it speaks another protocol: an HTTP request that a
	// web page can send here would have its body's events run).
	framed bool
	seen   bool // an event was read

	// slot is the session's place among the server's connections;
	// evicted is set when a new connection takes it.
	slot    *sessions.Slot
	evicted atomic.Bool
}

func (s *Server) newSession(conn net.Conn, slot *sessions.Slot) *session {
	ss := &session{srv: s, conn: conn, slot: slot,
		r:   newReader(conn, limits{header: s.opts.MaxHeaderBytes, data: s.opts.MaxDataBytes, payload: s.opts.MaxPayloadBytes}),
		w:   newWriter(conn, conn, s.opts.WriteTimeout),
		log: s.log.With("remote", conn.RemoteAddr().String()),
	}
	ss.ctx, ss.cancel = context.WithCancelCause(s.group.Hard())
	return ss
}

// run reads and answers events until the session ends, then closes the
// connection.
func (ss *session) run() {
	ctx, stop := context.WithTimeoutCause(ss.ctx, ss.srv.opts.MaxSession, errSessionLimit)
	defer stop()
	ss.ctx = ctx
	unwatch := context.AfterFunc(ctx, func() {
		if ss.srv.group.Hard().Err() != nil {
			_ = ss.conn.Close() // nothing more is sent
			return
		}
		ss.wake()
	})
	defer unwatch()
	ss.log.Debug("wyoming connection opened")
	err := ss.serve()
	ss.end(err)
}

// serve answers events until one ends the session, whose cause it
// returns.
func (ss *session) serve() error {
	for {
		ev, err := ss.next()
		if err != nil {
			return err
		}
		err = ss.handle(ev)
		var pe *protocolError
		if errors.As(err, &pe) {
			err = ss.refuse(pe)
		}
		if err != nil {
			return err
		}
	}
}

// next returns the next event. An event the reader refuses but can read
// past is answered with an error event, and the next one read.
func (ss *session) next() (event, error) {
	for {
		ss.slot.Idle(ss.stream == nil)
		ss.mu.Lock()
		err := ss.stopReading()
		if err == nil {
			deadline := time.Now().Add(ss.srv.opts.IdleTimeout)
			if st := ss.stream; st != nil && !st.quietAt.IsZero() && st.quietAt.Before(deadline) {
				deadline = st.quietAt // to tell the talker its sentence has ended
			}
			if st := ss.stream; st != nil && st.limitAt.Before(deadline) {
				deadline = st.limitAt
			}
			err = ss.conn.SetReadDeadline(deadline)
		}
		ss.mu.Unlock()
		if err != nil {
			return event{}, err
		}
		ev, err := ss.r.read()
		var fe *frameError
		var ne net.Error
		switch {
		case err == nil && ss.evicted.Load():
			// Evicted as it came: the new connection has its place.
			return event{}, errEvicted
		case err == nil:
			ss.slot.Idle(false)
			ss.framed, ss.seen = true, true
			return ev, nil
		case errors.As(err, &fe) && !fe.fatal && !ss.framed:
			return event{}, &frameError{msg: fe.msg + " (" + ss.notWyoming() + ")", fatal: true}
		case errors.As(err, &fe) && !fe.fatal:
			ss.framed = false
			if err := ss.refuse(malformed("%s", fe.msg)); err != nil {
				return event{}, err
			}
		case errors.As(err, &ne) && ne.Timeout():
			if st := ss.stream; st != nil && !time.Now().Before(st.limitAt) {
				st.abandon()
				ss.stream = nil
				ss.srv.m.syntheses.WithLabelValues(formStream, "failed").Inc()
				return event{}, ss.fail(CodeStreamLimit, "the stream has taken text for %s without synthesize-stop, its longest: closing the connection", ss.srv.opts.MaxStream)
			}
			if st := ss.stream; st != nil {
				if said, err := st.quiet(); said || err != nil {
					if err != nil {
						return event{}, err
					}
					continue
				}
			}
			// Woken to stop, or to look again (a stop while a stream is
			// under way): stopReading says which. Else the client was idle.
			ss.mu.Lock()
			err := ss.stopReading()
			ss.mu.Unlock()
			if err == nil && ss.srv.group.Stopping().Err() == nil {
				err = errIdle
			}
			if err != nil {
				return event{}, err
			}
		default:
			return event{}, err
		}
	}
}

// notWyoming says why a malformed line ends the session.
func (ss *session) notWyoming() string {
	if !ss.seen {
		return "the connection's first line is no Wyoming event"
	}
	return "a second malformed line, with no event between"
}

// stopReading returns why the session must read no more events, or nil.
// ss.mu is held.
func (ss *session) stopReading() error {
	if ss.ctx.Err() != nil {
		return ss.ctxEnd()
	}
	if ss.evicted.Load() {
		return errEvicted
	}
	if ss.stream != nil && ss.stream.failed() {
		return ss.stream.err
	}
	if ss.srv.group.Stopping().Err() != nil && ss.stream == nil {
		return errShuttingDown
	}
	return nil
}

// ctxEnd returns why the session's ctx ended.
func (ss *session) ctxEnd() error {
	if ss.srv.group.Hard().Err() != nil {
		return errHardStop
	}
	return context.Cause(ss.ctx)
}

// evict ends the session, idle, for a new connection.
func (ss *session) evict() {
	ss.evicted.Store(true)
	ss.wake()
}

// wake makes a read under way return at once, so that the session looks
// at why it should stop.
func (ss *session) wake() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_ = ss.conn.SetReadDeadline(time.Now())
}

// handle answers one event. A *protocolError is answered with an error
// event by serve; any other error ends the session.
func (ss *session) handle(ev event) error {
	switch ev.Type {
	case typeDescribe:
		return ss.w.write(typeInfo, ss.srv.cat.info(), nil, true)
	case typePing:
		var text string
		if err := stringField(ev, ev.Data, "text", &text, false); err != nil {
			return err
		}
		d := pingData{}
		if _, ok := ev.Data["text"]; ok {
			d.Text = &text
		}
		return ss.w.write(typePong, d, nil, true)
	case typeSynthesize:
		if ss.stream != nil {
			// Within a stream, the whole text comes again for clients of
			// an older protocol: the stream speaks it already.
			return nil
		}
		return ss.synthesize(ev)
	case typeSynthesizeStart:
		return ss.startStream(ev)
	case typeSynthesizeChunk:
		return ss.streamChunk(ev)
	case typeSynthesizeStop:
		return ss.stopStream()
	}
	ss.log.Debug("wyoming: ignoring an event of a type this server does not serve", "type", ev.Type)
	return nil
}

// refuse answers an event that cannot be done with an error event.
func (ss *session) refuse(pe *protocolError) error {
	ss.srv.m.protocol.Inc()
	ss.log.Info("wyoming: event refused", "code", pe.code, "err", pe.msg)
	return ss.w.write(typeError, errorData{Text: pe.msg, Code: pe.code}, nil, true)
}

// fail ends a synthesis with an error event; the session then ends.
func (ss *session) fail(code, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	ss.log.Info("wyoming: synthesis failed", "code", code, "err", msg)
	if err := ss.w.write(typeError, errorData{Text: msg, Code: code}, nil, true); err != nil {
		return err
	}
	return errFailed
}

// end ends the session for err: it says why when the client should know,
// stops the stream under way, and closes the connection.
func (ss *session) end(err error) {
	var fe *frameError
	switch {
	case errors.Is(err, errIdle):
		ss.say(CodeIdle, fmt.Sprintf("no event came for %s: closing the connection", ss.srv.opts.IdleTimeout))
	case errors.Is(err, errSessionLimit):
		ss.say(CodeSessionLimit, fmt.Sprintf("the connection reached its longest life, %s: closing it", ss.srv.opts.MaxSession))
	case errors.Is(err, errShuttingDown):
		ss.say(CodeShuttingDown, "the server is shutting down")
	case errors.Is(err, errEvicted):
		ss.say(CodeTooManyConnections, fmt.Sprintf("the server holds its most connections (%d), and this one, waiting for an event the longest, was closed for a new one", ss.srv.opts.MaxConns))
	case errors.As(err, &fe):
		ss.srv.m.protocol.Inc()
		ss.say(CodeMalformed, fe.msg+": closing the connection")
	case errors.Is(err, io.EOF), errors.Is(err, errFailed), errors.Is(err, errHardStop):
	default:
		ss.log.Debug("wyoming connection broken", "err", err)
	}
	_ = ss.conn.Close()
	ss.cancel(errEnded)
	if ss.stream != nil {
		ss.stream.abandon()
		ss.stream = nil
	}
	ss.log.Debug("wyoming connection closed")
}

// say sends a last error event, if the connection takes it.
func (ss *session) say(code, msg string) {
	ss.log.Info("wyoming: closing a connection", "code", code, "reason", msg)
	_ = ss.w.write(typeError, errorData{Text: msg, Code: code}, nil, true)
}
