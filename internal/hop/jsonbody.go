package hop

// Reading a one-shot (JSON) /v1/run body: its memory taken from the
// server's budget first, the read under a deadline, and a strict decode
// that leaves a long stage_input string where it is.

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
)

// fastInputMin is the shortest stage_input string that decodeRun takes out
// of the body before the JSON decoder sees it.
var fastInputMin = 32 << 10

// inputKey starts a stage_input string member.
const inputKey = `"stage_input":"`

// inputStandIn replaces a long stage_input string for the JSON decoder. It
// is not base64url (the '~'), so if it ever reached the codec it would be
// refused.
const inputStandIn = `"~stage_input~"`

// reserveBody takes the memory a JSON body may need from the server's
// budget (ServerOptions.MaxBodyMemory) before it is read: its declared
// length, or MaxBody when it declares none. Until its call returns, the
// body, its decoded payload and the stage's input are in memory, so the
// reservation lasts that long. A call that cannot reserve its part within
// the body read timeout is refused as overloaded (503, retryable): a
// burst of big bodies, signed or forged, costs at most the budget, and
// each body is read, base64-decoded and its signature checked before any
// more of it is copied.
func (s *Server) reserveBody(r *http.Request) (release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > s.opts.MaxBody {
		n = s.opts.MaxBody // a longer body is refused as it is read
	}
	return s.bodies.Take(r.Context(), max(n, 1), "/v1/run bodies")
}

// readJSON reads a JSON /v1/run body, under the body read deadline, and
// decodes it into req. req.StageInput may refer to the body, which is
// reused once done is called: call it when nothing refers to req any more.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, req *RunRequest) (done func(), err error) {
	buf, _ := bodies.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	done = func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodies.Put(buf)
		}
	}
	if n := r.ContentLength; n > 0 {
		// Trust a declared length only so far: the body may never come.
		buf.Grow(int(min(n, maxPooledBody)) + bytes.MinRead)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	_, err = buf.ReadFrom(r.Body)
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		done()
		return nil, httperr.ReadError(err)
	}
	if err := decodeRun(buf.Bytes(), req); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// bodies holds the buffers (*bytes.Buffer) of JSON bodies, so that a hop
// of a long payload does not leave a buffer as long for the collector;
// bigger buffers are dropped so that a burst of long payloads does not pin
// memory.
var bodies sync.Pool

const maxPooledBody = 4 << 20

// decodeRun decodes a /v1/run body strictly, like httperr.UnmarshalJSON,
// into req. A long stage_input string without escapes (every payload) is
// cut out of the body first and put back into req by reference: scanning
// it byte by byte in encoding/json is otherwise most of the cost of a hop.
// The cut changes nothing else: a `"` that follows '{' or ',' (and white
// space) and is followed by `stage_input":` opens a key in any valid JSON
// text, since a string's own quotes are escaped and after a closing quote
// only punctuation may follow; in invalid text the decoder fails before it
// reaches the cut. Duplicate keys keep encoding/json's meaning (the last
// wins). What the cut string holds is not checked here: the payload codec
// refuses anything but base64url, so a string JSON would refuse (a raw
// control character) is refused all the same, as a payload.
func decodeRun(body []byte, req *RunRequest) error {
	start, end, ok := findStageInput(body)
	if !ok {
		return httperr.UnmarshalJSON(body, req)
	}
	cut := make([]byte, 0, len(body)-(end-start)+len(inputStandIn))
	cut = append(append(append(cut, body[:start]...), inputStandIn...), body[end:]...)
	if err := httperr.UnmarshalJSON(cut, req); err != nil {
		return err
	}
	if string(req.StageInput) == inputStandIn {
		req.StageInput = body[start:end]
	}
	return nil
}

// findStageInput returns where the quoted stage_input string starts and
// ends in body, when it is the first stage_input member, written without
// white space around its colon, at least fastInputMin bytes long and
// without a backslash (an escape).
func findStageInput(body []byte) (start, end int, ok bool) {
	i := bytes.Index(body, []byte(inputKey))
	if i < 0 {
		return 0, 0, false
	}
	j := i - 1
	for j >= 0 && isJSONSpace(body[j]) {
		j--
	}
	if j < 0 || body[j] != '{' && body[j] != ',' {
		return 0, 0, false
	}
	start = i + len(inputKey) - 1
	n := bytes.IndexByte(body[start+1:], '"')
	if n < fastInputMin || bytes.IndexByte(body[start+1:start+1+n], '\\') >= 0 {
		return 0, 0, false
	}
	return start, start + n + 2, true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
