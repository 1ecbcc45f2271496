package api

// The speech stream sessions a server holds at once: under their own
// bound, apart from the HTTP connections', the idle ones making room for
// new ones.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// liveWideYAML is liveYAML with room for 8 requests at once in each
// stage.
const liveWideYAML = liveYAML + `  stages:
    - {id: 0, max_inflight: 8}
    - {id: 1, max_inflight: 8}
    - {id: 2, max_inflight: 8}
`

// dialStatus opens a session at base, returning it or the status of the
// refusal.
func dialStatus(t *testing.T, base string) (*wsClient, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(base), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp == nil {
			t.Fatalf("dialing: %v", err)
		}
		return nil, resp.StatusCode
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(-1)
	return &wsClient{t: t, conn: c}, http.StatusSwitchingProtocols
}

// TestSpeechStreamSessionCap: sessions do not hold the HTTP connections'
// places (with as many sessions open as --max-conns, a probe is answered
// at once); past their own bound, a new session takes the place of the
// one with no utterance in progress for the longest, which is closed with
// session_evicted and status 1013, and is refused (503 overloaded) while
// every session has an utterance in progress.
func TestSpeechStreamSessionCap(t *testing.T) {
	srv := newRunFixture(t, setup{yaml: liveWideYAML, engines: liveEngines(nil),
		opts: Options{MaxConns: 3, SpeechStream: SpeechStreamLimits{MaxSessions: 3}}})
	url, _ := runServer(t, srv)
	waitReady(t, url)
	var open []*wsClient
	for range 3 {
		c, status := dialStatus(t, url)
		if c == nil {
			t.Fatalf("session %d refused with %d", len(open), status)
		}
		c.event(evConfig, "response_format", "pcm")
		open = append(open, c)
	}
	a, b, c := open[0], open[1], open[2]
	probe := &http.Client{Timeout: 5 * time.Second}
	if code, body := get(t, probe, url+"/health"); code != http.StatusOK {
		t.Fatalf("a probe beside as many sessions as connections: %d %s", code, body)
	}

	// A new session evicts a, idle the longest, once it has been for the
	// grace.
	d := dialUntilOpen(t, url)
	wantErrorEvent(t, a.recv(), "session_evicted", "was closed for a new one")
	if s := a.closed(); s != websocket.StatusTryAgainLater {
		t.Errorf("the evicted session closed with %d, want 1013", s)
	}

	// With an utterance in progress in each, no session makes room.
	for _, s := range []*wsClient{b, c, d} {
		if s == d {
			s.event(evConfig, "response_format", "pcm")
		}
		s.event(evText, "text", "Still talking, with no input.done yet. And")
	}
	for _, s := range []*wsClient{b, c, d} {
		s.until(evAudioDone)
	}
	time.Sleep(2 * time.Second) // longer than the grace: busy sessions stay
	if e, status := dialStatus(t, url); e != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("a session among busy ones: %d, want 503", status)
	}
	// Once c's utterance is done, c may go.
	c.event(evDone)
	c.utterance()
	dialUntilOpen(t, url)
	wantErrorEvent(t, c.recv(), "session_evicted", "")
	if s := c.closed(); s != websocket.StatusTryAgainLater {
		t.Errorf("the evicted session closed with %d, want 1013", s)
	}
	// b was not touched.
	b.event(evDone)
	if h := b.utterance(); h.end.typ != evSessionDone {
		t.Errorf("b's utterance: %s", h.end.raw)
	}
}

// dialUntilOpen dials base until a session opens (a refusal with 503
// while no session has been idle for the grace).
func dialUntilOpen(t *testing.T, base string) *wsClient {
	t.Helper()
	deadline := time.Now().Add(wsDeadline)
	for {
		c, status := dialStatus(t, base)
		switch {
		case c != nil:
			return c
		case status != http.StatusServiceUnavailable || time.Now().After(deadline):
			t.Fatalf("a new session: %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSpeechStreamLiveShare: live utterances hold at most their share of
// the pipeline's admission slots (half of 4: two), so that with two held
// open, a third is refused (overloaded, its text dropped to its
// input.done) while HTTP requests are still admitted.
func TestSpeechStreamLiveShare(t *testing.T) {
	yaml := strings.Replace(liveWideYAML, "abort_timeout: 2s", "abort_timeout: 2s\n  max_inflight: 4", 1)
	f := newFixture(t, setup{yaml: yaml, engines: liveEngines(nil)})
	var held []*wsClient
	for range 2 {
		c := dialWS(t, f.url, nil)
		c.event(evConfig, "response_format", "pcm")
		c.event(evText, "text", "Held open. And")
		c.until(evAudioDone)
		held = append(held, c)
	}
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm")
	c.event(evText, "text", "One too many. And")
	wantErrorEvent(t, c.recv(), "overloaded", "live input holds its share of model live's requests (2 of 4 at once")
	for i := range 2 {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "live", "input": "Whole text.", "response_format": "pcm"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d beside the live utterances: %d %s", i, resp.StatusCode, body)
		}
	}
	c.event(evDone)
	if m := c.recv(); m.typ != evSessionDone {
		t.Fatalf("the refused utterance ended with %s", m.raw)
	}
	// Once one live utterance is done, its share is free again.
	held[0].event(evDone)
	held[0].utterance()
	c.event(evText, "text", "Now there is room.")
	c.event(evDone)
	if h := c.utterance(); h.end.typ != evSessionDone || len(h.starts) != 1 {
		t.Errorf("after a live utterance ended: %s", h.end.raw)
	}
}

// TestSpeechStreamUtteranceOpen: an utterance that takes text for longer
// than its bound without input.done is ended there: an error event, its
// text so far spoken, its session.done; more text begins the next one.
func TestSpeechStreamUtteranceOpen(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil), opts: Options{SpeechStream: SpeechStreamLimits{MaxUtteranceOpen: 300 * time.Millisecond}}})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm")
	c.event(evText, "text", "Spoken at once. And the rest")
	h := c.failingUtterance()
	if len(h.errs) != 1 || h.end.typ != evSessionDone || len(h.starts) != 2 || h.starts[1].SentenceText != "And the rest" {
		t.Fatalf("errors %d, sentences %+v, end %s", len(h.errs), h.starts, h.end.raw)
	}
	wantErrorEvent(t, h.errs[0], "session_timeout", "utterance 0 has taken text for 300ms without input.done")
	c.event(evText, "text", "Next one.")
	c.event(evDone)
	var done wsSessionDone
	h = c.utterance()
	h.end.decode(t, &done)
	if done.UtteranceIndex != 1 {
		t.Errorf("the next text's utterance: %s", h.end.raw)
	}
}
