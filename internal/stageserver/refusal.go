package stageserver

// A streamed call refused after its header: the answer goes out while its
// caller may still be sending the stream, which is read on for a while so
// that the caller gets the answer rather than a reset connection.

import (
	"io"
	"net/http"
	"time"
)

// The bounds of the read after a refusal: the caller, once it has the
// answer, stops sending; until then it may send as fast as its stage
// makes the stream.
const (
	refusalDrainTime  = 5 * time.Second
	refusalDrainBytes = 64 << 20
)

// Refusal is the error of a streamed call whose header a caller signed (a
// router or a coordinator of this deployment) but that this server
// refuses: addressed to another stage, off the request's route. Its
// caller is likely still sending the stream. Over HTTP/1.1 a server that
// closes a connection with a body still coming resets it, and the reset
// can discard the answer before the caller has read it; so the handler
// that writes the answer then calls Drain.
type Refusal struct {
	err  error
	rc   *http.ResponseController
	body io.Reader
}

func (e *Refusal) Error() string { return e.err.Error() }
func (e *Refusal) Unwrap() error { return e.err }

// refuse turns err, the refusal of a call whose body was not read to its
// end, into a *Refusal; the connection closes after the answer, as the
// rest of the body is not read to its end. A body read to its end needs
// nothing more.
func refuse(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, body *bodyReader, err error) error {
	err = body.inputError(err)
	if body.isEnded() {
		return err
	}
	body.finish()
	w.Header().Set("Connection", "close")
	return &Refusal{err: err, rc: rc, body: r.Body}
}

// Drain sends the answer written so far and reads what is left of the
// request body, for at most refusalDrainTime and refusalDrainBytes, or
// until the caller stops sending; then the handler may return.
func (e *Refusal) Drain() {
	if e.rc.Flush() != nil {
		return
	}
	_ = e.rc.SetReadDeadline(time.Now().Add(refusalDrainTime))
	_, _ = io.CopyN(io.Discard, e.body, refusalDrainBytes)
	// Over HTTP/2 a deadline is a timer that would reset the stream later.
	_ = e.rc.SetReadDeadline(time.Time{})
}
