// Package quote shortens a client's input for quoting it in a message (an
// error, a log line), so that a huge input never makes a huge message.
package quote

import "unicode/utf8"

// Max bounds the input Short quotes, in bytes.
const Max = 200

// Short returns s, cut to at most Max bytes at a character boundary with
// "…" after.
func Short(s string) string {
	if len(s) <= Max {
		return s
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
