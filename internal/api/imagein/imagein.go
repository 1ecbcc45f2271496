// Package imagein reads the images requests carry, as every endpoint of
// the HTTP API takes them (POST /v1/generate and the entry stage of POST
// /v1/run): an image file's bytes, sent in JSON as base64 or a data: URL,
// checked on its header before anything runs.
package imagein

import (
	"encoding/base64"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/imaging"
)

// MaxBytes bounds an image file (imaging's default).
var MaxBytes = imaging.DefaultLimits.MaxBytes

// Check checks an image file's bytes, its format and size from its
// header: a bad one is a 400 that says what is wrong (the pixels are
// decoded by the pipeline's first stage).
func Check(b []byte) (*engine.Image, error) {
	img, err := imaging.Header(b, imaging.DefaultLimits)
	if err != nil {
		return nil, httperr.BadRequest("image: %v", strings.TrimPrefix(err.Error(), "invalid input: "))
	}
	return &img, nil
}

// FromString returns the image sent in JSON field, checked: base64
// (standard or URL-safe, padded or not) or a data: URL of base64.
func FromString(field, s string) (*engine.Image, error) {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(meta, ";base64") {
			return nil, httperr.BadRequest(`%s is a data: URL that is not base64 ("data:image/png;base64,..." is)`, field)
		}
		s = data
	}
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return Check(b)
		}
	}
	return nil, httperr.BadRequest("%s is not base64: send the image file's bytes in base64, or a data: URL", field)
}
