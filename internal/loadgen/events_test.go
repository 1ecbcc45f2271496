package loadgen

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// events returns an answer of server-sent events whose body is body.
func events(body string) *eventStream {
	return newEventStream(&http.Response{Body: io.NopCloser(strings.NewReader(body))}, 24000)
}

// TestEventStream: the samples of each audio delta, the other events
// skipped, then the end once done has come.
func TestEventStream(t *testing.T) {
	s := events("data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAAAAAA\"}\n\n" + // 6 bytes
		"data: {\"type\":\"speech.word_timestamps\",\"words\":[{\"word\":\"hi\",\"char_start\":0,\"char_end\":2,\"start_ms\":0,\"end_ms\":90}]}\n\n" +
		": a comment\n\n" +
		"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n" + // 3 bytes: 1 sample
		"data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":2,\"output_tokens\":0,\"total_tokens\":2}}\n\n")
	ctx := context.Background()
	for i, want := range []int{3, 1} {
		n, rate, err := s.Next(ctx)
		if n != want || rate != 24000 || err != nil {
			t.Fatalf("delta %d: %d samples at %d Hz, %v; want %d at 24000", i, n, rate, err, want)
		}
	}
	for range 2 {
		if _, _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("after done: %v, want io.EOF", err)
		}
	}
}

// TestEventStreamErrors: an error event is the stream's error, and an
// answer that ends without done or an error, or with an event that is not
// JSON, is a bad response.
func TestEventStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		body, code string
	}{
		{"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\ndata: {\"type\":\"error\",\"error\":{\"message\":\"stage 1 (vocoder): lost\",\"type\":\"server_error\",\"code\":\"replica_lost\"}}\n\n", "replica_lost"},
		{"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\n", CodeBadResponse},
		{"data: {\"type\":\"speech.audio.delta\",\"audio\":\"AAAA\"}\n\ndata: {\"type\"\n\n", CodeBadResponse},
		{"data: {\"type\":\"error\"}\n\n", CodeBadResponse},
	} {
		s := events(tc.body)
		var err error
		for err == nil {
			_, _, err = s.Next(context.Background())
		}
		if e := (*Error)(nil); !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%q: %v, want code %s", tc.body, err, tc.code)
		}
	}
}
