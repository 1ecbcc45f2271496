// Package captions turns word timestamps tied to the input text (one entry
// per input token, with its code-point span) into subtitle cues, and
// writes them as WebVTT or SRT.
//
// A cue holds whole words, in the input's own text (with the punctuation
// between and after them), and ends at a sentence's end (a word followed
// by '.', '!' or '?'), before it would no longer fit in two lines of
// MaxLineRunes characters, or before it would last longer than
// MaxCueDuration. A cue's text longer than a line is broken into two at
// the space that balances them best. A cue
// runs from its first word's start to its last word's end, and lasts at
// least MinCueDuration, unless the next cue starts sooner.
package captions

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/omnistage/omnistage/internal/engine"
)

// Readability limits, as common subtitle guidelines have them.
const (
	MaxLineRunes   = 42
	MaxCueDuration = 7 * time.Second
	MinCueDuration = 800 * time.Millisecond
)

// Cue is one caption: its text (one or two lines) and when it shows.
type Cue struct {
	Start, End time.Duration
	Text       string
}

// Formats are the caption formats, by the name a request or a file
// extension gives them.
var Formats = []string{"vtt", "srt"}

// ContentType returns the MIME type of format.
func ContentType(format string) string {
	if format == "srt" {
		return "application/x-subrip; charset=utf-8"
	}
	return "text/vtt; charset=utf-8"
}

// Cues builds the cues of words, the timestamps of input.
func Cues(input string, words []engine.Word) []Cue {
	runes := []rune(input)
	var cues []Cue
	var cur []engine.Word
	flush := func() {
		if len(cur) == 0 {
			return
		}
		cues = append(cues, Cue{
			Start: ms(cur[0].StartMs), End: ms(cur[len(cur)-1].EndMs),
			Text: wrapped(cueText(runes, cur)),
		})
		cur = cur[:0]
	}
	for _, w := range words {
		if len(cur) > 0 {
			_, fits := wrap(cueText(runes, append(cur, w)))
			slower := ms(w.EndMs)-ms(cur[0].StartMs) > MaxCueDuration
			if !fits || slower {
				flush()
			}
		}
		cur = append(cur, w)
		if endsSentence(runes, w) {
			flush()
		}
	}
	flush()
	// Short cues stay up a little longer, never into the next one.
	for i := range cues {
		end := cues[i].Start + MinCueDuration
		if i+1 < len(cues) {
			end = min(end, cues[i+1].Start)
		}
		cues[i].End = max(cues[i].End, end)
	}
	return cues
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// cueText is the input from the first word to the end of the last one's
// trailing punctuation, its white space collapsed.
func cueText(runes []rune, ws []engine.Word) string {
	from := clamp(ws[0].CharStart, len(runes))
	to := trailing(runes, clamp(ws[len(ws)-1].CharEnd, len(runes)))
	if to < from {
		return ""
	}
	return strings.Join(strings.Fields(string(runes[from:to])), " ")
}

// trailing returns where the punctuation right after position i ends.
func trailing(runes []rune, i int) int {
	for i < len(runes) && unicode.IsPunct(runes[i]) {
		i++
	}
	return i
}

// endsSentence reports whether w is followed by a sentence's end mark.
func endsSentence(runes []rune, w engine.Word) bool {
	end := clamp(w.CharEnd, len(runes))
	return strings.ContainsAny(string(runes[end:trailing(runes, end)]), ".!?")
}

func clamp(i, n int) int { return max(0, min(i, n)) }

// wrap breaks text longer than MaxLineRunes into two lines at the space
// that makes the longer line shortest, and reports whether both lines are
// at most MaxLineRunes long.
func wrap(text string) (string, bool) {
	r := []rune(text)
	if len(r) <= MaxLineRunes {
		return text, true
	}
	best, longest := -1, len(r)
	for i, c := range r {
		if c == ' ' {
			if l := max(i, len(r)-i-1); l < longest {
				best, longest = i, l
			}
		}
	}
	if best < 0 {
		return text, false
	}
	return string(r[:best]) + "\n" + string(r[best+1:]), longest <= MaxLineRunes
}

// wrapped is wrap's text.
func wrapped(text string) string {
	s, _ := wrap(text)
	return s
}

// Write writes cues in format ("vtt" or "srt").
func Write(w io.Writer, format string, cues []Cue) error {
	var b strings.Builder
	switch format {
	case "vtt":
		b.WriteString("WEBVTT\n")
		for _, c := range cues {
			fmt.Fprintf(&b, "\n%s --> %s\n%s\n", stamp(c.Start, '.'), stamp(c.End, '.'), vttEscaper.Replace(c.Text))
		}
	case "srt":
		for i, c := range cues {
			if i > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n", i+1, stamp(c.Start, ','), stamp(c.End, ','), srtEscaper.Replace(c.Text))
		}
	default:
		return fmt.Errorf("captions: unknown format %q (want vtt or srt)", format)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// A cue's text is the user's input: in WebVTT, & and < are markup (and >
// ends a tag), so they are written as character references, which also
// breaks any "-->" (the timing arrow) into "--&gt;". SRT has no escapes: an
// arrow there is broken with a space, so that no line of a cue's text
// reads as a timing line. Cues' text never holds a blank line (cueText
// folds white space), which would end the cue.
var (
	vttEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	srtEscaper = strings.NewReplacer("-->", "-- >")
)

// stamp formats d as HH:MM:SS.mmm, with sep before the milliseconds.
func stamp(d time.Duration, sep byte) string {
	msAll := d.Milliseconds()
	h, m, s, ms := msAll/3600000, msAll/60000%60, msAll/1000%60, msAll%1000
	return fmt.Sprintf("%02d:%02d:%02d%c%03d", h, m, s, sep, ms)
}
