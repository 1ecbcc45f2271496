package stageserver

// A JSON string taken out of a body as it arrives: its characters passed
// on unescaped, part by part, until its closing quote.

import (
	"bytes"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/httperr"
)

// stringScan is the state of a JSON string taken out of a body as it
// arrives, after its opening quote.
type stringScan struct {
	esc  [6]byte // an escape begun and not ended: `\` and up to 5 more bytes
	nesc int
	done bool // the closing quote was seen
	pos  int  // the string's bytes passed on, for messages
}

// scan takes the string's characters from p and passes them to out,
// unescaped, until the closing quote; it returns how many bytes of p it
// took, the quote included. An escape that JSON does not define is an
// invalid_json error; an error of out is returned as it is. Raw control
// characters, which JSON refuses in a string, are passed on: the payload
// codec refuses anything but base64url.
func (s *stringScan) scan(p []byte, out func([]byte) error) (int, error) {
	taken := 0
	for len(p) > 0 && !s.done {
		if s.nesc > 0 {
			k, err := s.escape(p, out)
			if err != nil {
				return 0, err
			}
			taken, p = taken+k, p[k:]
			continue
		}
		end := len(p)
		if q := bytes.IndexByte(p, '"'); q >= 0 {
			end = q
		}
		if b := bytes.IndexByte(p[:end], '\\'); b >= 0 {
			end = b
		}
		if err := out(p[:end]); err != nil {
			return 0, err
		}
		s.pos += end
		taken, p = taken+end, p[end:]
		if len(p) == 0 {
			break
		}
		if p[0] == '"' {
			s.done = true
		} else {
			s.esc[0], s.nesc = '\\', 1
		}
		taken, p = taken+1, p[1:]
	}
	return taken, nil
}

// escape takes the bytes of the escape begun from p, and once it is whole
// passes on what it stands for; it returns how many bytes of p it took.
func (s *stringScan) escape(p []byte, out func([]byte) error) (int, error) {
	k := 0
	for s.nesc < 2 || s.esc[1] == 'u' && s.nesc < len(s.esc) {
		if k == len(p) {
			return k, nil
		}
		s.esc[s.nesc] = p[k]
		s.nesc, k = s.nesc+1, k+1
	}
	esc := s.esc[:s.nesc]
	s.nesc = 0
	r, ok := unescape(esc)
	if !ok {
		return 0, httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body is not valid JSON: stage_input holds the escape %q, which JSON does not define", esc)
	}
	var b [utf8.UTFMax]byte
	n := utf8.EncodeRune(b[:], r)
	s.pos += n
	return k, out(b[:n])
}

// unescape returns the character a whole JSON escape stands for (a
// surrogate half stands for itself, which is no base64 either).
func unescape(esc []byte) (rune, bool) {
	if esc[1] == 'u' {
		v, err := strconv.ParseUint(string(esc[2:]), 16, 16)
		return rune(v), err == nil
	}
	i := bytes.IndexByte([]byte(`"\/bfnrt`), esc[1])
	if i < 0 {
		return 0, false
	}
	return rune("\"\\/\b\f\n\r\t"[i]), true
}
