package cli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/stageserver"
)

// TestServeHopLimits: the --hop-* flags become the API's hop limits, 0
// turning the rate bound off; a negative rate or a window that is not
// positive is a usage error.
func TestServeHopLimits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want stageserver.Limits
	}{
		{nil, stageserver.Limits{MinInputRate: stageserver.DefaultMinInputRate, InputWindow: stageserver.DefaultInputWindow}},
		{[]string{"--hop-min-input-rate", "0", "--hop-max-duration", "-1s"}, stageserver.Limits{MinInputRate: -1, InputWindow: stageserver.DefaultInputWindow, MaxDuration: -time.Second}},
		{[]string{"--hop-min-input-rate", "1024", "--hop-input-window", "2s", "--hop-max-duration", "1h"}, stageserver.Limits{MinInputRate: 1024, InputWindow: 2 * time.Second, MaxDuration: time.Hour}},
	} {
		f, _, ok := parseServeFlags(Env{Stderr: io.Discard}, tc.args)
		if !ok {
			t.Fatalf("%v refused", tc.args)
		}
		if got := f.apiOptions().HopLimits; got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.args, got, tc.want)
		}
	}
	for _, args := range [][]string{{"--hop-min-input-rate", "-1"}, {"--hop-input-window", "0s"}} {
		var stderr strings.Builder
		if _, code, ok := parseServeFlags(Env{Stderr: &stderr}, args); ok || code != ExitUsage || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%v: ok %v, exit %d, %q", args, ok, code, stderr.String())
		}
	}
}
