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
func DecodeJSON(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isSyntax(err) {
			return jsonError(err)
		}
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "request body has data after its JSON value")
	}
	return nil
}

// UnmarshalJSON is DecodeJSON of a body already read.
func UnmarshalJSON(body []byte, dst any) error {
	return DecodeJSON(bytes.NewReader(body), dst)
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// jsonError turns a decoding error into a 400 a person can act on.
func jsonError(err error) error {
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
		return Errorf(http.StatusRequestTimeout, CodeBodyTimeout, "the request body did not arrive in time: send the whole body at once")
	case errors.As(err, &oe):
		// The connection failed; its addresses are no business of the answer.
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the request body could not be read: the connection failed")
	case errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is truncated JSON")
	case errors.As(err, &se):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "request body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return Errorf(http.StatusBadRequest, CodeInvalidJSON, "request body must be a JSON object, not a JSON %s", te.Value)
		}
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "field %s: want %s, got a JSON %s", te.Field, engine.JSONType(te.Type), te.Value)
	}
	return Errorf(http.StatusBadRequest, CodeInvalidJSON, "invalid request: %s", quote.Short(strings.TrimPrefix(err.Error(), "json: ")))
}

// ReadError turns an error reading a request body into the error to
// answer with: a 413 for an oversized body, a 408 for one that did not
// arrive in time, else a 400.
func ReadError(err error) error { return jsonError(err) }
