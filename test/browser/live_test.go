package browser

// Live mode: the page streams typed or fed text over the speech stream's
// WebSocket, speaks each sentence as it completes, and barges in.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// liveState is window.omnistagePlayground.live.
type liveState struct {
	State               string           `json:"state"`
	Utterances          int              `json:"utterances"`
	Sentences           []string         `json:"sentences"`
	FirstAudioSent      int              `json:"firstAudioSent"`
	BeforeDone          []bool           `json:"beforeDone"`
	Cancelled           *liveCancelled   `json:"cancelled"`
	AudioAfterCancelled int              `json:"audioAfterCancelled"`
	Bytes               int              `json:"bytes"`
	Errors              []map[string]any `json:"errors"`
}

type liveCancelled struct {
	TotalBytes int    `json:"total_bytes"`
	HeardText  string `json:"heard_text"`
}

func live(t *testing.T, ctx context.Context) liveState {
	t.Helper()
	st, err := chromedp.Run(ctx, chromedp.Evaluate[liveState](`window.omnistagePlayground.live`))
	if err != nil {
		t.Fatalf("reading the page's live counters: %v", err)
	}
	return st
}

// The texts live mode speaks.
const (
	typedFirst = "Hello from live mode. I"
	typedRest  = "t speaks as you type."
)

// litText is the utterance whose words live mode lights as they play.
const litText = "Words light up as they are heard."

var (
	litWords       = strings.Fields(strings.TrimSuffix(litText, "."))
	typedSentences = []string{"Hello from live mode.", "It speaks as you type."}
	fedSentences   = []string{"An answer streams in.", "Each sentence plays as it ends.", "The last one waits for the end."}
	longSentences  = []string{"This is a long answer.", "It goes on for a while.", "The user will talk over it.", "So it must stop at once.", "Nothing after the stop plays.", "And the page says what was heard.", "One more sentence.", "And one more."}
)

// testLive drives live mode on the page of the server at url, model tts:
// typed text is spoken sentence by sentence as it is typed (the first
// before the rest is typed), text fed word by word likewise, and Stop
// barges in: audio.cancelled comes, no audio after it, and the session
// goes on; with word timestamps on, each word is lit as it plays.
func testLive(t *testing.T, ctx context.Context, url string) {
	do(t, ctx, 30*time.Second, chromedp.Navigate(url))
	waitFor(t, ctx, `omnistagePlayground.ready`, 20*time.Second)
	do(t, ctx, 10*time.Second, chromedp.Evaluate[chromedp.Void](`(() => { const b = document.querySelector('#timestamps'); if (!b.checked) b.click(); })()`))
	do(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#live")))
	waitFor(t, ctx, `!document.querySelector('#live-box').hidden`, 5*time.Second)

	t.Run("typed", func(t *testing.T) {
		do(t, ctx, 10*time.Second, typeInto("#live-text", typedFirst))
		waitFor(t, ctx, `omnistagePlayground.live.sentences.length >= 1 || omnistagePlayground.live.errors.length > 0`, 20*time.Second)
		st := live(t, ctx)
		if !slices.Equal(st.BeforeDone, []bool{true}) || st.FirstAudioSent < 0 || st.FirstAudioSent > len(typedFirst) {
			t.Errorf("the first sentence's audio came with %d characters sent (before Done: %v); want it before the rest is typed", st.FirstAudioSent, st.BeforeDone)
		}
		do(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#live-text"), typedRest), chromedp.Click(chromedp.CSS("#live-done")))
		waitLive(t, ctx, 1, typedSentences)
		waitFor(t, ctx, `["done", "error"].includes(omnistagePlayground.state)`, 30*time.Second)
		if ps := state(t, ctx); ps.State != "done" || ps.SamplesReceived == 0 || ps.SamplesPlayed != ps.SamplesReceived || ps.SampleRate != 16000 {
			t.Errorf("after the typed utterance: state %q, %d samples received at %d Hz, %d played", ps.State, ps.SamplesReceived, ps.SampleRate, ps.SamplesPlayed)
		}
	})

	t.Run("fed", func(t *testing.T) {
		feedText(t, ctx, strings.Join(fedSentences, " "), 20)
		waitLive(t, ctx, 2, append(slices.Clone(typedSentences), fedSentences...))
		if st := live(t, ctx); !slices.Equal(st.BeforeDone, []bool{true, true}) {
			t.Errorf("the fed text's first audio came before its end: %v, want true", st.BeforeDone)
		}
	})

	t.Run("stop", func(t *testing.T) {
		feedText(t, ctx, strings.Join(longSentences, " "), 30)
		waitFor(t, ctx, `omnistagePlayground.live.sentences.length >= 7`, 20*time.Second)
		do(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#live-stop")))
		waitFor(t, ctx, `omnistagePlayground.live.cancelled !== null`, 10*time.Second)
		st := live(t, ctx)
		fed := strings.Join(longSentences, " ")
		if c := st.Cancelled; c.TotalBytes == 0 || !strings.HasPrefix(fed, c.HeardText) {
			t.Errorf("audio.cancelled %+v; want bytes sent and a prefix of %q", c, fed)
		}
		if ps := state(t, ctx); ps.State != "stopped" {
			t.Errorf("after Stop the page is %q", ps.State)
		}
		// The session goes on: more text is a new utterance.
		do(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#live-text"), " After the stop."), chromedp.Click(chromedp.CSS("#live-done")))
		waitFor(t, ctx, `omnistagePlayground.live.utterances >= 3`, 20*time.Second)
		st = live(t, ctx)
		if got := st.Sentences[len(st.Sentences)-1]; got != "After the stop." || st.AudioAfterCancelled != 0 || len(st.Errors) != 0 {
			t.Errorf("after the stop: last sentence %q, %d audio messages after audio.cancelled, errors %v", got, st.AudioAfterCancelled, st.Errors)
		}
	})

	t.Run("words lit", func(t *testing.T) {
		do(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#live-text"), " "+litText), chromedp.Click(chromedp.CSS("#live-done")))
		waitFor(t, ctx, `omnistagePlayground.live.utterances >= 4 || omnistagePlayground.live.errors.length > 0`, 20*time.Second)
		// Earlier utterances may still be playing, lighting their own
		// words in between: the lit utterance's words must come, in order.
		want, _ := json.Marshal(litWords)
		waitFor(t, ctx, fmt.Sprintf(`(() => { const want = %s; let i = 0; for (const w of omnistagePlayground.highlighted) if (w === want[i]) i++; return i === want.length || omnistagePlayground.live.errors.length > 0; })()`, want), 20*time.Second)
		if st := live(t, ctx); len(st.Errors) > 0 {
			t.Errorf("live words lit with errors %v", st.Errors)
		}
	})
}

// feedText puts text in the Text box and feeds it at rate words a second.
func feedText(t *testing.T, ctx context.Context, text string, rate int) {
	t.Helper()
	do(t, ctx, 10*time.Second, typeInto("#text", text), typeInto("#feed-rate", fmt.Sprint(rate)), chromedp.Click(chromedp.CSS("#feed")))
}

// waitLive waits until n utterances are done, and checks the sentences
// spoken so far.
func waitLive(t *testing.T, ctx context.Context, n int, sentences []string) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf(`omnistagePlayground.live.utterances >= %d || omnistagePlayground.live.errors.length > 0`, n), 40*time.Second)
	st := live(t, ctx)
	if st.Utterances != n || len(st.Errors) > 0 || !slices.Equal(st.Sentences, sentences) {
		t.Errorf("live: %d utterances, errors %v, sentences %q; want %d and %q", st.Utterances, st.Errors, st.Sentences, n, sentences)
	}
}
