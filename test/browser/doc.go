// Package browser tests the web playground that omnistage serve answers at
// / in a real browser: Debian's chromium, headless, driven through
// chromedp. It is a module of its own so that chromedp stays out of the
// server's go.mod; it builds cmd/omnistage and runs `omnistage serve` as a
// user does, and skips when chromium is not installed
// (scripts/install-deps.sh installs it).
//
// Screenshots at desktop and phone widths go to $OMNISTAGE_ARTIFACTS when
// it is set, else to the test's artifact directory (go test -artifacts
// keeps it).
package browser
