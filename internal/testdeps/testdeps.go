// Package testdeps says what a test does when something it needs is not
// installed. It imports nothing of omnistage, so that any package's tests
// (and the other test modules) may use it. Only tests import it.
package testdeps

import (
	"fmt"
	"os"
	"testing"
)

// Missing ends a test that needs something this machine lacks (a command,
// a package, a model): it skips on a developer's machine, where the
// message says how to install it, and fails under CI (the environment
// variable CI set, as .ci/run sets it), where scripts/install-deps.sh
// --test has installed everything, so that a dependency CI lost turns the
// run red instead of quietly testing less.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s (CI is set: scripts/install-deps.sh --test should have installed it)", msg)
		return
	}
	tb.Skip(msg)
}
