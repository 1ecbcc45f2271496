package api

// Barge-in: input.cancel stops an utterance's audio at once, says what of
// it was sent and heard, frees its stages and keeps the session.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitReleased polls /metrics until no stage holds a binding and no
// request is in flight, and returns how long that took (a failure after
// wsDeadline).
func waitReleased(t testing.TB, f *fixture) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		m := f.metricsText()
		busy := false
		for _, l := range strings.Split(m, "\n") {
			if (strings.HasPrefix(l, "omnistage_stage_bindings{") || strings.HasPrefix(l, "omnistage_requests_inflight")) && !strings.HasSuffix(l, " 0") {
				busy = true
			}
		}
		if !busy {
			return time.Since(start)
		}
		if time.Since(start) > wsDeadline {
			t.Fatalf("stages still bound after %s:\n%s", wsDeadline, grepLines(m, "omnistage_stage_bindings"))
		}
		time.Sleep(time.Millisecond)
	}
}

// gateAfter returns a vocoder hook that lets n blocks through, then holds
// each until open is called (or the request ends).
func gateAfter(n int) (hook func(context.Context, int) error, open func()) {
	g := newGate()
	var once sync.Once
	return func(ctx context.Context, i int) error {
		if i < n {
			return nil
		}
		return g.wait(ctx)
	}, func() { once.Do(g.open) }
}

// TestSpeechStreamCancel: input.cancel mid-utterance answers
// audio.cancelled with the bytes sent, the audio they make and the text
// they fully covered (whole sentences, and further the timed words), and
// nothing of the utterance after it; the stages are freed, and the next
// utterance is spoken in the same session.
func TestSpeechStreamCancel(t *testing.T) {
	hook, open := gateAfter(4) // the first sentence (3 blocks) and one of the second
	defer open()
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(&liveHooks{block: hook})})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	const text = "One two three. Four five six seven eight. Nine ten."
	c.event(evText, "text", text)
	c.event(evDone)
	// The first sentence (10 ms a character: 14 characters, 3 blocks) is
	// all sent, then one block of the second.
	var read []wsMsg
	for audioBytes(read) < 2*(14*liveSamplesPerChar+liveBlock) {
		read = append(read, c.recv())
	}
	c.event(evCancel)
	h := c.utterance(read...)
	if h.end.typ != evCancelled {
		t.Fatalf("the utterance ended with %s, want audio.cancelled", h.end.raw)
	}
	var ev wsCancelled
	h.end.decode(t, &ev)
	sent := int64(len(h.audio()))
	if ev.UtteranceIndex != 0 || ev.TotalBytes != sent || ev.SentenceIndex != 1 || ev.RequestID == "" {
		t.Errorf("audio.cancelled %+v; want utterance 0, sentence 1, the %d bytes sent", ev, sent)
	}
	if want := int(sent / 2 * 1000 / fakeRate); ev.AudioMs != want {
		t.Errorf("audio_ms %d, want %d", ev.AudioMs, want)
	}
	// The first sentence was all heard; of the second, the words that end
	// within the 50 ms of it sent: its first of five (over 260 ms), none.
	if ev.HeardCharEnd != len("One two three.") || ev.HeardText != "One two three." {
		t.Errorf("heard up to %d, %q; want the first sentence", ev.HeardCharEnd, ev.HeardText)
	}
	var words []string
	for _, w := range ev.Words {
		words = append(words, w.Word)
		if w.EndMs > ev.AudioMs {
			t.Errorf("word %+v ends after the %d ms sent", w, ev.AudioMs)
		}
	}
	if strings.Join(words, " ") != "One two three" {
		t.Errorf("words heard %q, want One two three", words)
	}
	waitReleased(t, f)

	// The session goes on: the next utterance is spoken whole.
	open()
	c.event(evText, "text", "Back again.")
	c.event(evDone)
	next := c.utterance()
	var done wsSessionDone
	next.end.decode(t, &done)
	if next.end.typ != evSessionDone || done.UtteranceIndex != 1 || done.TotalSentences != 1 {
		t.Fatalf("after the cancel: %s", next.end.raw)
	}
	// A cancel with nothing in progress is answered too, and ends the
	// index it would have had.
	c.event(evCancel)
	m := c.recv()
	m.decode(t, &ev)
	if m.typ != evCancelled || ev.UtteranceIndex != 2 || ev.TotalBytes != 0 || ev.SentenceIndex != -1 {
		t.Errorf("cancel of nothing: %s", m.raw)
	}
	c.event(evText, "text", "Three.")
	c.event(evDone)
	third := c.utterance()
	third.end.decode(t, &done)
	if done.UtteranceIndex != 3 {
		t.Errorf("the utterance after that: %s", third.end.raw)
	}
}

// audioBytes counts the audio bytes of msgs.
func audioBytes(msgs []wsMsg) int {
	n := 0
	for _, m := range msgs {
		n += len(m.audio)
	}
	return n
}

// TestSpeechStreamCancelRace cancels while the pipeline makes audio as
// fast as it can, many times: each time no audio follows audio.cancelled,
// its count is the bytes that came, and the utterances queued behind it
// are cancelled too.
func TestSpeechStreamCancelRace(t *testing.T) {
	// The vocoder makes a block for each token, and the client gives one
	// for each message it reads: the audio keeps flowing, a few blocks
	// ahead of the client, until it cancels.
	tokens := make(chan struct{}, 64)
	give := func(n int) {
		for range n {
			select {
			case tokens <- struct{}{}:
			default:
			}
		}
	}
	paced := &liveHooks{block: func(ctx context.Context, _ int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-tokens:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(paced)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "wav", "stream_audio", true)
	long := strings.Repeat("A sentence of some length goes here. ", 40)
	for i := range 20 {
		// The cancelled request's vocoder is gone before tokens come: it
		// would take them.
		waitReleased(t, f)
		give(8)
		c.event(evText, "text", long)
		c.event(evDone)
		c.event(evText, "text", "Queued behind.")
		c.event(evDone)
		read := c.until(evAudioStart)
		if n := audioBytes(read); n > 0 {
			t.Fatalf("round %d: %d bytes of audio before its audio.start: the last round's, after its audio.cancelled", i, n)
		}
		// Cancel after a few messages more, each time a few later.
		for range i % 5 {
			read = append(read, c.recv())
			give(1)
		}
		c.event(evCancel)
		h := c.utterance(read...)
		var ev wsCancelled
		h.end.decode(t, &ev)
		if h.end.typ != evCancelled || ev.TotalBytes != int64(len(h.audio())) || ev.UtteranceIndex != 2*i {
			t.Fatalf("round %d: %s after %d bytes", i, h.end.raw, len(h.audio()))
		}
		// The queued utterance is cancelled with nothing sent.
		m := c.recv()
		m.decode(t, &ev)
		if m.typ != evCancelled || ev.UtteranceIndex != 2*i+1 || ev.TotalBytes != 0 {
			t.Fatalf("round %d: the queued utterance: %s", i, m.raw)
		}
	}
	waitReleased(t, f)
	c.event(evClose)
	if s := c.closed(); s != 1000 {
		t.Errorf("closed with %d", s)
	}
}

// TestSpeechStreamCancelBlocked cancels while the server waits to write
// audio to a client that does not read, with more audio queued behind:
// once the client reads again, audio.cancelled comes after the message
// being written, and no audio of the utterance after it.
func TestSpeechStreamCancelBlocked(t *testing.T) {
	h := &liveHooks{}
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(h)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true)
	sentence := strings.Repeat("a", 5998) + ". "
	c.event(evText, "text", strings.Repeat(sentence, 10))
	c.event(evDone)
	read := c.until(evAudioStart)
	// The client reads no more: the server's writes fill the sockets, and
	// the pipeline stops.
	var last int64 = -1
	for n := h.blocks.Load(); n != last; n = h.blocks.Load() {
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	c.event(evCancel)
	u := c.utterance(read...)
	if u.end.typ != evCancelled {
		t.Fatalf("ended with %s", u.end.raw)
	}
	var ev wsCancelled
	u.end.decode(t, &ev)
	if ev.TotalBytes != int64(len(u.audio())) {
		t.Errorf("audio.cancelled says %d bytes, %d came before it", ev.TotalBytes, len(u.audio()))
	}
	// Nothing of it after: the next utterance's events come next.
	c.event(evText, "text", "Next.")
	c.event(evDone)
	if next := c.utterance(); next.end.typ != evSessionDone {
		t.Errorf("the next utterance ended with %s", next.end.raw)
	}
}
