package loadgen

// A speech answer of server-sent events (stream_format sse): audio deltas
// of raw PCM among word timestamps, then done or an error.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
)

// maxEvent bounds one event's line: a delta of a whole sentence's audio in
// base64, or the timestamps of a long paragraph.
const maxEvent = 16 << 20

// eventStream reads an answer of server-sent events.
type eventStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	rate int
	done bool // speech.audio.done has come
}

func newEventStream(resp *http.Response, rate int) *eventStream {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, readBuffer), maxEvent)
	return &eventStream{resp: resp, sc: sc, rate: rate}
}

// Next implements Stream: the samples of the next audio delta, skipping
// the other events; io.EOF once the answer has ended after its done
// event, the error event's error, or CodeBadResponse for an answer that
// ends without either.
func (s *eventStream) Next(ctx context.Context) (int, int, error) {
	for s.sc.Scan() {
		data, ok := strings.CutPrefix(s.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apijson.SpeechEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, 0, &Error{Code: CodeBadResponse, Msg: fmt.Sprintf("an event is not speech JSON: %v", err)}
		}
		switch ev.Type {
		case apijson.SpeechDelta:
			return len(ev.Audio) / 2, s.rate, nil
		case apijson.SpeechDone:
			s.done = true
		case apijson.SpeechError:
			if ev.Error == nil {
				return 0, 0, &Error{Code: CodeBadResponse, Msg: "an error event without its error"}
			}
			return 0, 0, &Error{Code: ev.Error.Code, Msg: ev.Error.Message}
		}
	}
	if err := s.sc.Err(); err != nil {
		return 0, 0, err
	}
	if !s.done {
		return 0, 0, &Error{Code: CodeBadResponse, Msg: "the events ended without " + apijson.SpeechDone}
	}
	return 0, 0, io.EOF
}

// Close implements Stream.
func (s *eventStream) Close() { s.resp.Body.Close() }
