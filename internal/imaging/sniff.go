package imaging

// Telling an image's format from its first bytes.

import (
	"bytes"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// The formats Decode reads, as engine.Image.Format names them.
const (
	PNG  = "png"
	JPEG = "jpeg"
	WebP = "webp"
)

// signature is a format's first bytes; a zero in mask means any byte.
type signature struct {
	format string
	magic  string
	mask   string
}

// readable are the signatures of the formats Decode reads.
var readable = []signature{
	{format: PNG, magic: "\x89PNG\r\n\x1a\n"},
	{format: JPEG, magic: "\xff\xd8\xff"},
	{format: WebP, magic: "RIFF\x00\x00\x00\x00WEBP", mask: "\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff"},
}

// unreadable are formats people send that Decode does not read, named so
// the refusal can say what the file is.
var unreadable = []signature{
	{format: "GIF", magic: "GIF8"},
	{format: "BMP", magic: "BM"},
	{format: "TIFF", magic: "II*\x00"},
	{format: "TIFF", magic: "MM\x00*"},
	{format: "PDF", magic: "%PDF-"},
	{format: "HEIF or AVIF", magic: "\x00\x00\x00\x00ftyp", mask: "\x00\x00\x00\x00\xff\xff\xff\xff"},
}

func (s signature) matches(b []byte) bool {
	if len(b) < len(s.magic) {
		return false
	}
	if s.mask == "" {
		return bytes.HasPrefix(b, []byte(s.magic))
	}
	for i := range len(s.magic) {
		if b[i]&s.mask[i] != s.magic[i]&s.mask[i] {
			return false
		}
	}
	return true
}

// Sniff returns the format of the image file b ("png", "jpeg" or "webp"),
// or an *engine.InputError when b is none of them.
func Sniff(b []byte) (string, error) {
	for _, s := range readable {
		if s.matches(b) {
			return s.format, nil
		}
	}
	for _, s := range unreadable {
		if s.matches(b) {
			return "", &engine.InputError{Reason: fmt.Sprintf("a %s file; send a PNG, JPEG or WebP image", s.format)}
		}
	}
	if len(b) == 0 {
		return "", &engine.InputError{Reason: "not an image: no bytes"}
	}
	return "", &engine.InputError{Reason: "not an image: the bytes are not a PNG, JPEG or WebP file"}
}
