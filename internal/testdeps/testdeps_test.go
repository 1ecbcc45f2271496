package testdeps

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that records what Missing asked of it instead
// of ending the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *recorder) Skip(a ...any)                  { r.skip = fmt.Sprint(a...) }

// TestMissing: without CI a missing dependency skips with the message;
// with CI it fails, saying the message and why.
func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		ci          string
		fatal, skip string
	}{
		{"", "", "no ffmpeg (install it)"},
		{"true", "no ffmpeg (install it) (CI is set: scripts/install-deps.sh --test should have installed it)", ""},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			Missing(r, "no %s (install it)", "ffmpeg")
			if r.fatal != tc.fatal || r.skip != tc.skip {
				t.Errorf("fatal %q, skip %q; want %q, %q", r.fatal, r.skip, tc.fatal, tc.skip)
			}
		})
	}
}
