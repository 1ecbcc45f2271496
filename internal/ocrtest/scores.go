package ocrtest

// Scores: what readers made of the test set, as a table.

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Scores gathers what readers made of the test set's images, by subset:
// the character error rate and the time of each reading. Its zero value
// is ready to use; it is not safe for concurrent use.
type Scores struct {
	readers []string
	subsets []string
	tallies map[[2]string]*tally // by reader and subset
	starts  map[[2]string]time.Duration
}

// tally is one reader's results on one subset.
type tally struct {
	cer, cerNoSpace float64
	cpu, wall       time.Duration
	n               int
}

// Add records that reader read s as got, in processor time cpu and wall
// time wall, and returns the reading's CER.
func (sc *Scores) Add(reader string, s Sample, got string, cpu, wall time.Duration) float64 {
	if sc.tallies == nil {
		sc.tallies = map[[2]string]*tally{}
	}
	if !slices.Contains(sc.readers, reader) {
		sc.readers = append(sc.readers, reader)
	}
	if !slices.Contains(sc.subsets, s.Subset) {
		sc.subsets = append(sc.subsets, s.Subset)
	}
	key := [2]string{reader, s.Subset}
	tl := sc.tallies[key]
	if tl == nil {
		tl = &tally{}
		sc.tallies[key] = tl
	}
	cer := CER(s.Text, got)
	tl.cer += cer
	tl.cerNoSpace += CERWithoutSpaces(s.Text, got)
	tl.cpu += cpu
	tl.wall += wall
	tl.n++
	return cer
}

// Startup records the processor time reader spends starting (its process
// and model, for a program started per image) on images of subset: the
// table then shows its time per image less that too, what a server that
// keeps it loaded would spend.
func (sc *Scores) Startup(reader, subset string, d time.Duration) {
	if sc.starts == nil {
		sc.starts = map[[2]string]time.Duration{}
	}
	sc.starts[[2]string{reader, subset}] = d
}

// Mean returns reader's mean CER and processor and wall time per image on
// subset, and how many images it read there (0: none).
func (sc *Scores) Mean(reader, subset string) (cer float64, cpu, wall time.Duration, n int) {
	tl := sc.tallies[[2]string{reader, subset}]
	if tl == nil || tl.n == 0 {
		return 0, 0, 0, 0
	}
	return tl.cer / float64(tl.n), tl.cpu / time.Duration(tl.n), tl.wall / time.Duration(tl.n), tl.n
}

// Table returns the scores as a Markdown table, a row per subset and
// reader (subsets in the set's order, readers in the order they were
// first added): the mean CER, with and without spaces (a reader that
// drops the spaces between words loses only on the first), and the mean
// processor and wall time per image.
func (sc *Scores) Table() string {
	var b strings.Builder
	b.WriteString("| subset | images | reader | CER | CER without spaces | CPU ms per image | wall ms per image | CPU ms less start |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, sub := range sc.orderedSubsets() {
		for _, r := range sc.readers {
			tl := sc.tallies[[2]string{r, sub}]
			if tl == nil || tl.n == 0 {
				continue
			}
			n := float64(tl.n)
			net := ""
			if d, ok := sc.starts[[2]string{r, sub}]; ok {
				net = fmt.Sprintf("%.0f", ms(tl.cpu)/n-ms(d))
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %.3f | %.0f | %.0f | %s |\n",
				sub, tl.n, r, tl.cer/n, tl.cerNoSpace/n, ms(tl.cpu)/n, ms(tl.wall)/n, net)
		}
	}
	return b.String()
}

// orderedSubsets returns the subsets seen, Set's first in its order.
func (sc *Scores) orderedSubsets() []string {
	var out []string
	for _, s := range []string{English, Rotated, Chinese} {
		if slices.Contains(sc.subsets, s) {
			out = append(out, s)
		}
	}
	for _, s := range sc.subsets {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ProcessCPU returns the processor time (user and system) this process
// has used: read before and after a reader that runs in the process, it
// is the reading's, and the Go runtime's meanwhile.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
