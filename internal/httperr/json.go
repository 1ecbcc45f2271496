package httperr

// Decoding JSON request bodies strictly, with errors a client can act on.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/quote"
)

// DecodeJSON decodes one JSON value from r strictly into dst: unknown
// fields and trailing data are errors. Every problem with the body is an
// *Error (400 invalid_json) a person can act on, except an
// *http.MaxBytesError, which is returned as it is (a 413).
func DecodeJSON(r io.Reader, dst any) error { return decodeJSON(r, dst, "request body") }

// DecodeJSONLoose is DecodeJSON that ignores unknown fields: for a body
// of another API's shape, whose clients send fields that change nothing
// here.
func DecodeJSONLoose(r io.Reader, dst any) error {
	if err := json.NewDecoder(r).Decode(dst); err != nil {
		return jsonError(err, "request body")
	}
	return nil
}

// UnmarshalJSON is DecodeJSON of a body already read.
func UnmarshalJSON(body []byte, dst any) error {
	return DecodeJSON(bytes.NewReader(body), dst)
}

// UnmarshalMessage is UnmarshalJSON of a message that is not a request
// body (a WebSocket event): the errors name it as what ("the event").
func UnmarshalMessage(what string, msg []byte, dst any) error {
	return decodeJSON(bytes.NewReader(msg), dst, what)
}

// decodeJSON is DecodeJSON, its errors naming what it decodes as what.
func decodeJSON(r io.Reader, dst any, what string) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isSyntax(err) {
			return jsonError(err, what)
		}
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s has data after its JSON value", what)
	}
	return nil
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// jsonError turns a decoding error of what ("request body") into a 400
// a person can act on.
func jsonError(err error, what string) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		me *http.MaxBytesError
	)
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &me):
		return err
	case errors.As(err, &ne) && ne.Timeout():
		return Errorf(http.StatusRequestTimeout, CodeBodyTimeout, "the %s did not arrive in time: send the whole body at once", what)
	case errors.As(err, &oe):
		// The connection failed; its addresses are no business of the answer.
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the %s could not be read: the connection failed", what)
	case errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s is empty; send a JSON object", what)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s is truncated JSON", what)
	case errors.As(err, &se):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s is not valid JSON: %s (at byte %d)", what, strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s must be a JSON object, not a JSON %s", what, te.Value)
		}
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "field %s: want %s, got a JSON %s", te.Field, engine.JSONType(te.Type), te.Value)
	}
	if what != "request body" {
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "%s: %s", what, quote.Short(strings.TrimPrefix(err.Error(), "json: ")))
	}
	return Errorf(http.StatusBadRequest, CodeInvalidJSON, "invalid request: %s", quote.Short(strings.TrimPrefix(err.Error(), "json: ")))
}

// ReadError turns an error reading a request body into the error to
// answer with: a 413 for an oversized body, a 408 for one that did not
// arrive in time, else a 400.
func ReadError(err error) error { return jsonError(err, "request body") }
