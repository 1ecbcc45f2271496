package loadgen

// The texts a load speaks: the built-in ones, or one per line of a file.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultTexts are the texts a run speaks unless given others: a dozen
// English sentences and paragraphs of varied length and make-up (a
// greeting, numbers, dates and times, abbreviations, a question, a list,
// a long paragraph), so that a run mixes short and long requests.
var DefaultTexts = []string{
	"Hello there.",
	"The quick brown fox jumps over the lazy dog.",
	"Your order of 3 items, totalling $42.50, will arrive on Tuesday, March 4th, between 9 a.m. and 1 p.m.",
	"Could you tell me the way to the nearest train station, please?",
	"Turn left at the second light, then keep right for about 200 yards until you reach the bridge.",
	"Dr. Smith will see you at 10:30 in room 214.",
	"Thank you for calling. All of our agents are busy right now, but your call is important to us. Please stay on the line, and the next available agent will be with you shortly.",
	"Today's forecast: sunny in the morning, with clouds building in the afternoon and a 40 percent chance of showers after 6 p.m. Highs near 72, lows around 55.",
	"First, preheat the oven. Second, mix the flour, the sugar and the eggs. Third, bake for 25 minutes, or until golden.",
	"It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it was the season of Darkness.",
	"Warning: the system will restart in five minutes. Save your work now.",
	"The committee met on the 12th of June to review the budget. After a long discussion, it approved the plan with two changes: the travel budget was cut by 15 percent, and the savings went to training. The next meeting is set for September, when the first results should be in.",
}

// MaxTextLen bounds one text of a texts file.
const MaxTextLen = 64 << 10

// ReadTexts reads texts, one per line; blank lines are skipped and
// surrounding white space is dropped. It is an error for r to hold none,
// or a line longer than MaxTextLen.
func ReadTexts(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxTextLen+1)
	var texts []string
	line := 0
	for sc.Scan() {
		line++
		if t := strings.TrimSpace(sc.Text()); t != "" {
			texts = append(texts, t)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d is longer than %d bytes", line+1, MaxTextLen)
		}
		return nil, err
	}
	if len(texts) == 0 {
		return nil, errors.New("no texts: the file holds only blank lines")
	}
	return texts, nil
}
