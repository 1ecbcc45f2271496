package api

// What a speech stream session sends: every message goes through one
// lock, which orders an utterance's audio against its audio.cancelled.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// errCancelled is what a send for an utterance returns once its
// audio.cancelled went out: the relay stops.
var errCancelled = errors.New("the utterance was cancelled")

// wsOut writes a session's messages. Each write holds mu, bounded by the
// write timeout (a client that stops reading is cut off): the messages of
// an utterance are dropped once its cancelled is set, under the same lock,
// so none follows its audio.cancelled. A failed write fails every later
// one.
type wsOut struct {
	conn    *websocket.Conn
	timeout time.Duration

	mu     sync.Mutex
	failed error
}

// write sends one message; o.mu is held.
func (o *wsOut) write(typ websocket.MessageType, b []byte) error {
	if o.failed != nil {
		return o.failed
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := o.conn.Write(ctx, typ, b); err != nil {
		o.failed = sendError{err}
		return o.failed
	}
	return nil
}

// broken reports whether a write failed (the client is gone or stopped
// reading).
func (o *wsOut) broken() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed != nil
}

// event sends the JSON event v, of utterance u (nil: of the session).
func (o *wsOut) event(u *utterance, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if u != nil && u.sent.cancelled {
		return errCancelled
	}
	return o.write(websocket.MessageText, b)
}

// audio sends b, audio of u's current sentence holding samples more
// samples (those it surely covers), and counts them.
func (o *wsOut) audio(u *utterance, b []byte, samples int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if u.sent.cancelled {
		return errCancelled
	}
	if err := o.write(websocket.MessageBinary, b); err != nil {
		return err
	}
	u.sent.bytes += int64(len(b))
	u.sent.samples += int64(samples)
	return nil
}

// audioEvent sends the JSON event v, which carries audio of u's current
// sentence of n bytes holding samples more samples, and counts them.
func (o *wsOut) audioEvent(u *utterance, v any, n, samples int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if u.sent.cancelled {
		return errCancelled
	}
	if err := o.write(websocket.MessageText, b); err != nil {
		return err
	}
	u.sent.bytes += int64(n)
	u.sent.samples += int64(samples)
	return nil
}

// note changes u's counts under the lock, unless u was cancelled.
func (o *wsOut) note(u *utterance, f func(s *sentAudio)) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if u.sent.cancelled {
		return errCancelled
	}
	f(&u.sent)
	return nil
}

// cancelled marks u cancelled and sends its audio.cancelled, at once
// after the audio message being written (if any): no message of u
// follows. It returns false if u was cancelled before.
func (o *wsOut) cancelled(u *utterance) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if u.sent.cancelled {
		return false, nil
	}
	u.sent.cancelled = true
	b, err := json.Marshal(u.heard())
	if err != nil {
		return true, err
	}
	return true, o.write(websocket.MessageText, b)
}
