package api

// The speech stream's formats: each sentence a file of its own, sent as
// it is made or whole, that decodes to the sentence's audio.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os/exec"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// TestSpeechStreamFormats speaks two sentences in every format, with and
// without stream_audio: pcm is the samples, wav a WAV file of them (of
// unknown length when streamed), opus and flac files that ffmpeg decodes
// to about as many samples (exactly, for flac); the sentences' mp3 and
// aac, back to back, are byte for byte what POST /v1/audio/speech streams
// of the text.
func TestSpeechStreamFormats(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	const text = "First one here. And the second."
	_, pcm := liveExpected(text)
	for _, format := range wsFormats {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", format, stream), func(t *testing.T) {
				c := dialWS(t, f.url, nil)
				c.event(evConfig, "response_format", format, "stream_audio", stream)
				c.event(evText, "text", text)
				c.event(evDone)
				h := c.utterance()
				if h.end.typ != evSessionDone || len(h.sentences) != 2 {
					t.Fatalf("%s, %d sentences", h.end.raw, len(h.sentences))
				}
				if utteranceWide(format) {
					resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
						map[string]any{"model": "live", "input": text, "response_format": format, "stream_format": "audio"})
					if resp.StatusCode != http.StatusOK || !bytes.Equal(h.audio(), body) {
						t.Errorf("%s: the sentences make %d bytes, HTTP streams %d (%d)", format, len(h.audio()), len(body), resp.StatusCode)
					}
					return
				}
				for i, file := range h.sentences {
					if !stream && countAudio(h.msgs, i) != 1 {
						t.Errorf("sentence %d came in %d messages, want one without stream_audio", i, countAudio(h.msgs, i))
					}
					checkFile(t, format, stream, file, pcm[i])
				}
			})
		}
	}
}

// countAudio counts the audio messages of sentence i of msgs.
func countAudio(msgs []wsMsg, i int) int {
	sentence, n := -1, 0
	for _, m := range msgs {
		switch {
		case m.typ == evAudioStart:
			sentence++
		case m.typ == "" && sentence == i:
			n++
		}
	}
	return n
}

// checkFile checks that file is pcm (16-bit little-endian samples) in
// format.
func checkFile(t *testing.T, format string, stream bool, file, pcm []byte) {
	t.Helper()
	switch format {
	case "pcm":
		if !bytes.Equal(file, pcm) {
			t.Errorf("pcm: %d bytes, not the sentence's %d", len(file), len(pcm))
		}
		return
	case "wav":
		size := uint32(len(pcm))
		if stream {
			size = audio.UnknownSize
		}
		if len(file) < audio.WAVHeaderLen || string(file[:4]) != "RIFF" || binary.LittleEndian.Uint32(file[40:44]) != size || !bytes.Equal(file[audio.WAVHeaderLen:], pcm) {
			t.Errorf("wav: %d bytes, data size %x; want a header of size %x and the sentence's samples", len(file), binary.LittleEndian.Uint32(file[40:44]), size)
		}
		return
	}
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		testdeps.Missing(t, "ffmpeg is not installed: it decodes the encoded formats")
	}
	cmd := exec.Command(ffmpeg, "-v", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	cmd.Stdin = bytes.NewReader(file)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg cannot decode the %s sentence (%d bytes): %v", format, len(file), err)
	}
	got, want := len(out)/2, len(pcm)/2
	switch {
	case format == "flac" && !bytes.Equal(out, pcm):
		t.Errorf("flac decodes to %d samples, not the sentence's %d", got, want)
	case got != want:
		t.Errorf("%s decodes to %d samples, want about %d", format, got, want)
	}
}
