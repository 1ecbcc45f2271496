package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/hop"
)

// TestRunCoordinatorStoppedMidAnswer: a stage server that stops after its
// answer began (headers sent, then silence) no longer hangs the run: after
// --hop-timeout of silence the call moves to the stage's next server, since
// nothing of its answer had gone anywhere, and with no other server the
// run ends with the silence named.
func TestRunCoordinatorStoppedMidAnswer(t *testing.T) {
	urls, _ := startStageServers(t)
	stopped := apitest.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", hop.ContentType)
		w.Header().Set(hop.HeaderStage, "1")
		w.Header().Set(hop.HeaderFinished, "true")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	out := filepath.Join(t.TempDir(), "a.wav")
	// --timeout only keeps a regression from hanging the test.
	_, stderr, code := runWith(t, "", "run", "--timeout", "1m", "--hop-timeout", "300ms", "--stage", "0="+urls[0], "--stage", "1="+stopped+","+urls[1],
		"--api-key-file", keyFile(t), "-o", out, "Hello there.")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "no byte of the answer for 300ms") || !strings.Contains(stderr, "trying "+urls[1]) {
		t.Errorf("no silence and retry line in:\n%s", stderr)
	}
	if a := readWAVFile(t, out); len(a.Samples) == 0 {
		t.Error("no audio")
	}
	_, stderr, code = runWith(t, "", "run", "--timeout", "1m", "--hop-timeout", "300ms", "--stage", "0="+urls[0], "--stage", "1="+stopped,
		"--api-key-file", keyFile(t), "-o", out, "Hello there.")
	if code != ExitFailure || !strings.Contains(stderr, "no byte of the answer for 300ms") || !strings.Contains(stderr, "giving up") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
