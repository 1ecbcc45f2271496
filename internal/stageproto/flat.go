package stageproto

// The headers of the messages a job's chunks and credit travel in, read
// and written without reflection: flat objects of a few fields, which are
// most of the messages of a connection. Anything else takes
// encoding/json's way, which gives the same result, only slower (the
// tests hold the two to each other).

import "strconv"

// flatField is where decodeFlat puts the value of a header field.
type flatField struct {
	str  func(h *Header) *string
	num  func(h *Header) *int64
	int  func(h *Header) *int
	flag func(h *Header) *bool
}

// flatFields are the fields decodeFlat reads; a header with another takes
// encoding/json's way.
var flatFields = map[string]flatField{
	"type":            {str: func(h *Header) *string { return &h.Type }},
	"kind":            {str: func(h *Header) *string { return &h.Kind }},
	"job":             {num: func(h *Header) *int64 { return &h.Job }},
	"id":              {num: func(h *Header) *int64 { return &h.ID }},
	"data_length":     {int: func(h *Header) *int { return &h.DataLength }},
	"sample_rate":     {int: func(h *Header) *int { return &h.SampleRate }},
	"chunks":          {int: func(h *Header) *int { return &h.Chunks }},
	"end_of_sentence": {flag: func(h *Header) *bool { return &h.EndOfSentence }},
	"format":          {str: func(h *Header) *string { return &h.Format }},
	"width":           {int: func(h *Header) *int { return &h.Width }},
	"height":          {int: func(h *Header) *int { return &h.Height }},
}

// decodeFlat decodes line into h, which is zero, and reports whether it
// could: line is one JSON object whose keys are all flatFields' and whose
// values are of their types (strings of printable ASCII without escapes,
// integers, booleans). When it reports false, h may hold part of line.
func decodeFlat(line []byte, h *Header) bool {
	p := flatParser{b: line}
	p.space()
	if !p.byte('{') {
		return false
	}
	p.space()
	if p.byte('}') {
		p.space()
		return p.i == len(p.b)
	}
	for {
		p.space()
		key, ok := p.plainString()
		if !ok {
			return false
		}
		f, known := flatFields[string(key)]
		p.space()
		if !known || !p.byte(':') {
			return false
		}
		p.space()
		switch {
		case f.str != nil:
			s, ok := p.plainString()
			if !ok {
				return false
			}
			*f.str(h) = string(s)
		case f.num != nil:
			n, ok := p.integer()
			if !ok {
				return false
			}
			*f.num(h) = n
		case f.int != nil:
			n, ok := p.integer()
			if !ok || int64(int(n)) != n {
				return false
			}
			*f.int(h) = int(n)
		default:
			b, ok := p.boolean()
			if !ok {
				return false
			}
			*f.flag(h) = b
		}
		p.space()
		if p.byte('}') {
			p.space()
			return p.i == len(p.b)
		}
		if !p.byte(',') {
			return false
		}
	}
}

// flatParser reads b from i on.
type flatParser struct {
	b []byte
	i int
}

func (p *flatParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *flatParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes.
func (p *flatParser) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// integer reads a JSON number that is an integer (no fraction, no
// exponent) and fits an int64.
func (p *flatParser) integer() (int64, bool) {
	start := p.i
	p.byte('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == digits, p.b[digits] == '0' && p.i-digits > 1:
		return 0, false // no digits, or a leading zero
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

func (p *flatParser) boolean() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// appendFlat appends the header JSON encodes v as, when v is one of the
// shapes of a job's chunks and credit (Chunk of a kind whose fields are
// a sample rate and an end-of-sentence mark, or an image's format and
// size, at most; Credit, JobEvent, Bare) and its strings need no escaping; ok is false otherwise. The
// bytes are json.Marshal's.
func appendFlat(b []byte, v any) (_ []byte, ok bool) {
	switch m := v.(type) {
	case Chunk:
		c := &m.ChunkHeader
		if c.Words != nil || c.Voice != "" || c.Channels != 0 || c.StrChannels != 0 || c.FrameShift != 0 ||
			c.Names != nil || c.Ends != nil || c.Cluster != nil || c.TargetPos != nil || c.TargetF0 != nil || c.Meta != nil ||
			c.Tensors != nil || c.Regions != nil || !plain(m.Type) || !plain(c.Kind) || !plain(c.Format) {
			return b, false
		}
		b = appendJob(b, m.Type, m.Job)
		if c.Kind != "" {
			b = append(append(append(b, `,"kind":"`...), c.Kind...), '"')
		}
		if c.SampleRate != 0 {
			b = strconv.AppendInt(append(b, `,"sample_rate":`...), int64(c.SampleRate), 10)
		}
		if c.EndOfSentence {
			b = append(b, `,"end_of_sentence":true`...)
		}
		if c.Format != "" {
			b = append(append(append(b, `,"format":"`...), c.Format...), '"')
		}
		if c.Width != 0 {
			b = strconv.AppendInt(append(b, `,"width":`...), int64(c.Width), 10)
		}
		if c.Height != 0 {
			b = strconv.AppendInt(append(b, `,"height":`...), int64(c.Height), 10)
		}
		return append(b, '}'), true
	case Credit:
		if !plain(m.Type) {
			return b, false
		}
		b = strconv.AppendInt(append(appendJob(b, m.Type, m.Job), `,"chunks":`...), int64(m.Chunks), 10)
		return append(b, '}'), true
	case JobEvent:
		if !plain(m.Type) {
			return b, false
		}
		return append(appendJob(b, m.Type, m.Job), '}'), true
	case Bare:
		if !plain(m.Type) {
			return b, false
		}
		return append(append(append(b, `{"type":"`...), m.Type...), `"}`...), true
	}
	return b, false
}

// appendJob appends the start of a job's message: its type and job.
func appendJob(b []byte, typ string, job int64) []byte {
	b = append(append(append(b, `{"type":"`...), typ...), `","job":`...)
	return strconv.AppendInt(b, job, 10)
}

// plain reports whether json.Marshal writes s as it is, between quotes:
// printable ASCII, none of it escaped (json escapes <, > and & for HTML).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
