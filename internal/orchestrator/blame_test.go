package orchestrator

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestAudioLimitBlame checks whom deploy.max_audio_seconds blames: the
// client (400) when its text explains that much audio or there is no
// text to tell, the stage (500) when a short text cannot (a program that
// floods audio).
func TestAudioLimitBlame(t *testing.T) {
	feed := engine.NewFeed()
	feed.Append("Hello there, this is a test.") // streamed: the text so far
	second := make([]int16, 16000)
	for _, tc := range []struct {
		name    string
		prompt  engine.Prompt
		seconds int // of audio made
		want    Code
		say     string
	}{
		{"within the limit", engine.Prompt{Text: "Hi."}, 600, codeUnclassified, ""},
		{"a short text", engine.Prompt{Text: "Hello there, this is a test one."}, 601, CodeStageFailed,
			"stage 2 (synth) made more than 600 s of audio (deploy.max_audio_seconds) for 32 characters of text, which explain at most 32 s: the stage's fault"},
		{"a streamed short text", engine.Prompt{Feed: feed}, 601, CodeStageFailed, "for 28 characters of text"},
		{"a long text", engine.Prompt{Text: strings.Repeat("99999 ", 100)}, 601, CodeBadRequest, "stage 2's audio passed the limit of 600 s for one request"},
		{"characters, not bytes", engine.Prompt{Text: strings.Repeat("語", 599)}, 601, CodeStageFailed, "for 599 characters"},
		{"no text", engine.Prompt{}, 601, CodeBadRequest, "send less text per request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := audioBudget{stage: 2, name: "synth", seconds: 600}
			var err error
			for range tc.seconds {
				if err = b.spend(&engine.Audio{SampleRate: 16000, Samples: second}, tc.prompt); err != nil {
					break
				}
			}
			if got := CodeOf(err); got != tc.want || (err != nil && !strings.Contains(err.Error(), tc.say)) {
				t.Errorf("%v (%s); want %s saying %q", err, got, tc.want, tc.say)
			}
		})
	}
}

// TestCodeOfStageLoss checks that a stage whose engine reports its
// replica's loss before the pool does fails its request as a lost
// replica (502), not as a failed engine (500).
func TestCodeOfStageLoss(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Code
	}{
		{&StageError{Stage: 2, Name: "synth", Err: fmt.Errorf("external: replica synth/0: the program exited: %w", engine.ErrReplicaLost)}, CodeReplicaLost},
		{&StageError{Stage: 2, Name: "synth", Err: errors.New("the model ran out of road")}, CodeStageFailed},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %s; want %s", tc.err, got, tc.want)
		}
	}
}
