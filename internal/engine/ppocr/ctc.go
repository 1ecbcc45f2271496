package ppocr

// CTC decoding of the recognizer's output over its character list.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// Dict is the recognizer's character list: what each of its output
// classes writes.
type Dict struct {
	// chars[0] is the CTC blank (""); then the list's characters, one a
	// line; then the space the model adds at the end.
	chars []string
}

// ReadDict reads a character list, one character a line
// (ppocr_keys_v1.txt), and adds the blank before it and the space after
// it, as PaddleOCR's CTCLabelDecode does with use_space_char.
func ReadDict(r io.Reader) (*Dict, error) {
	d := &Dict{chars: []string{""}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || !utf8.ValidString(line) {
			return nil, fmt.Errorf("dict: line %d is empty or not UTF-8", len(d.chars))
		}
		d.chars = append(d.chars, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dict: %w", err)
	}
	if len(d.chars) == 1 {
		return nil, fmt.Errorf("dict: no characters")
	}
	d.chars = append(d.chars, " ")
	return d, nil
}

// LoadDict reads the character list in the file at path.
func LoadDict(path string) (*Dict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dict: %w", err)
	}
	defer f.Close()
	return ReadDict(f)
}

// Classes returns the number of classes the recognizer's output has for
// this list: the characters, the blank and the space.
func (d *Dict) Classes() int { return len(d.chars) }

// Line is one decoded line.
type Line struct {
	// Text is the line, without spaces at its ends.
	Text string
	// Confidence is the score of each of Text's code points.
	Confidence []float32
	// Score is the mean of the scores of the characters the model wrote,
	// spaces at its ends included (as PaddleOCR scores a line) and spaces
	// read in gaps (RecOptions.SpaceScore) left out, 0 when it has none.
	Score float32
}

// Decode decodes one crop's output, steps × Classes() scores: at each
// step the best class; a class repeated at consecutive steps counts once,
// blanks are dropped, and each character kept brings its step's score.
// With o.SpaceScore above 0, a space the model scored but did not write
// is read too (see RecOptions.SpaceScore), and brings its best score in
// the gap. Spaces at the line's ends are then trimmed off Text and
// Confidence.
func (o RecOptions) Decode(d *Dict, probs []float32, steps int) (Line, error) {
	nc := len(d.chars)
	if steps < 0 || len(probs) != steps*nc {
		return Line{}, fmt.Errorf("ctc: %d scores for %d steps of %d classes", len(probs), steps, nc)
	}
	var text strings.Builder
	var line Line
	var sum float64
	n := 0
	// prev is the best class at the step before; last the character
	// written last (-1 before the first); gap the best score of the space
	// class over the blank steps since the last step that was not blank.
	prev, last := -1, -1
	var gap float32
	for t := range steps {
		row := probs[t*nc : (t+1)*nc]
		best := 0
		for c, p := range row {
			if p > row[best] {
				best = c
			}
		}
		if best == 0 {
			gap = max(gap, row[nc-1])
			prev = best
			continue
		}
		if best != prev {
			ch := d.chars[best]
			if o.SpaceScore > 0 && gap >= o.SpaceScore && last >= 0 && spaceBetween(d.chars[last], ch) {
				text.WriteByte(' ')
				line.Confidence = append(line.Confidence, gap)
			}
			text.WriteString(ch)
			for range utf8.RuneCountInString(ch) {
				line.Confidence = append(line.Confidence, row[best])
			}
			sum += float64(row[best])
			n++
			last = best
		}
		gap = 0
		prev = best
	}
	line.Text = text.String()
	lead := len(line.Text) - len(strings.TrimLeft(line.Text, " "))
	line.Text = strings.Trim(line.Text, " ")
	line.Confidence = line.Confidence[lead : lead+utf8.RuneCountInString(line.Text)]
	if n > 0 {
		line.Score = float32(sum / float64(n))
	}
	return line, nil
}

// spaceBetween reports whether a space may be read between the
// characters a and b: neither is a space, and neither is written without
// spaces around it (Chinese, Japanese, Korean, their punctuation and
// full-width forms).
func spaceBetween(a, b string) bool {
	if a == " " || b == " " {
		return false
	}
	ra, _ := utf8.DecodeLastRuneInString(a)
	rb, _ := utf8.DecodeRuneInString(b)
	return !cjk(ra) && !cjk(rb)
}

// cjk reports whether r is written without spaces around it.
func cjk(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(r >= 0x3000 && r <= 0x303f) || // CJK symbols and punctuation: 。、「」
		(r >= 0xff00 && r <= 0xffef) // full-width forms: ，：（）
}

// ApplyRec applies the recognizer's output for regions (probs, N × steps
// × Classes()): each region gets its Text and Confidence and loses its
// Crop, and the regions whose line scores under o.DropScore are left out
// of the result. regions is changed in place: pass a copy of a received
// chunk's slice.
func (o RecOptions) ApplyRec(d *Dict, regions []engine.Region, probs []float32, steps int) ([]engine.Region, error) {
	per := steps * d.Classes()
	if len(probs) != len(regions)*per {
		return nil, fmt.Errorf("rec: %d scores for %d regions of %d steps of %d classes", len(probs), len(regions), steps, d.Classes())
	}
	kept := regions[:0]
	for i := range regions {
		line, err := o.Decode(d, probs[i*per:(i+1)*per], steps)
		if err != nil {
			return nil, fmt.Errorf("rec: region %d: %w", regions[i].Index, err)
		}
		if line.Score < o.DropScore {
			continue
		}
		r := regions[i]
		r.Text, r.Confidence, r.Crop = line.Text, line.Confidence, nil
		kept = append(kept, r)
	}
	return kept, nil
}
