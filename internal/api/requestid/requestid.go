// Package requestid reads a request's id as every endpoint of the HTTP API
// takes it: from the body's request_id field or the X-Request-Id header.
package requestid

import (
	"net/http"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/quote"
)

// Header is the header that carries a request's id, both ways.
const Header = "X-Request-Id"

// From returns the caller's request id: the body's field or the Header
// ("" to have one generated). Both may be given only when they agree;
// otherwise the error is a 400.
func From(r *http.Request, body string) (string, error) {
	h := r.Header.Get(Header)
	switch {
	case body == "":
		return h, nil
	case h != "" && h != body:
		return "", httperr.BadRequest("request_id %q and header %s %q differ; send one of them", quote.Short(body), Header, quote.Short(h))
	}
	return body, nil
}
