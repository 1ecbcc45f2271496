package flite

// Concurrency: every engine and entry point of the package at once, for
// every voice, each result bit-identical to a lone run's.

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/testkit/cdriver"
)

// concurrentTexts are the texts of TestConcurrent: one sentence, several
// with numbers and abbreviations, and a paragraph.
var concurrentTexts = []string{oneSentence, fewSentences, paragraphText, "It is 3:45, Mr. O'Brien; take 12 apples!"}

// loneJob is one call of the package, with what it returned when it ran
// alone.
type loneJob struct {
	name string
	do   func() (any, error)
	want any
}

// concurrentJobs lists, for every voice and text, the talker, the vocoder
// on the talker's output with two seeds, Analyze, SynthesizeTimed and
// flite_text_to_wave, and runs each alone once for its expected result.
func concurrentJobs(t *testing.T) []loneJob {
	var jobs []loneJob
	for _, voice := range Voices() {
		talker, vocoder := talkerFor(t, voice), vocoderFor(t, voice)
		v, _ := lookupVoice(voice)
		for ti, s := range concurrentTexts {
			mid, err := run(talker, "", text(s))
			if err != nil {
				t.Fatal(err)
			}
			clean, err := cleanText(s)
			if err != nil {
				t.Fatal(err)
			}
			add := func(what string, do func() (any, error)) {
				jobs = append(jobs, loneJob{name: fmt.Sprintf("%s/text-%d/%s", voice, ti, what), do: do})
			}
			add("talker", func() (any, error) { return run(talker, "", text(s)) })
			for _, seed := range []string{"1", "4000000000"} {
				add("vocoder-seed-"+seed, func() (any, error) {
					out, err := run(vocoder, `{"seed": `+seed+`}`, mid...)
					return concat(out), err
				})
			}
			add("analyze", func() (any, error) { return Analyze(s, voice) })
			add("timed", func() (any, error) {
				a, words, err := SynthesizeTimed(s, voice, 7)
				return []any{a, words}, err
			})
			add("reference", func() (any, error) { return referenceWave(v, clean, 9), nil })
		}
	}
	for i := range jobs {
		got, err := jobs[i].do()
		if err != nil {
			t.Fatalf("%s alone: %v", jobs[i].name, err)
		}
		jobs[i].want = got
	}
	return jobs
}

// TestConcurrent runs the jobs of concurrentJobs from several goroutines
// at once, each goroutine half of them in an order of its own and, one
// goroutine in two, locked to a thread of its own, and requires every
// result to be the lone run's: the same frames, segments and words, the
// same samples. Run it with -race.
func TestConcurrent(t *testing.T) {
	jobs := concurrentJobs(t)
	const goroutines = 6
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*len(jobs))
	for g := range goroutines {
		wg.Go(func() {
			if g%2 == 0 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			order := rand.New(rand.NewPCG(uint64(g), 1)).Perm(len(jobs))
			for _, i := range order[:len(order)/2] {
				got, err := jobs[i].do()
				switch {
				case err != nil:
					errs <- fmt.Errorf("goroutine %d, %s: %w", g, jobs[i].name, err)
				case !reflect.DeepEqual(got, jobs[i].want):
					errs <- fmt.Errorf("goroutine %d, %s: the result differs from a lone run's", g, jobs[i].name)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRandMatchesLibc checks that the per-thread rand() of crand.c is
// libc's generator: the same sequence after the same srand().
func TestRandMatchesLibc(t *testing.T) {
	for _, seed := range []uint32{0, 1, 2, 7, 12345, 4000000000} {
		want, err := libcRandSeq(seed, 100000)
		if err != nil {
			t.Fatal(err)
		}
		if got := randSeq(seed, len(want)); !slices.Equal(got, want) {
			t.Errorf("seed %d: the sequence differs from libc's", seed)
		}
	}
}

// TestRandInterposed checks that flite's own calls to rand() (libflite.so
// imports it from libc) reach crand.c's definition in this executable:
// vocoding with a clustergen voice on a thread draws once per sample from
// that thread's sequence. (kal16's residuals draw no noise: it draws
// nothing.)
func TestRandInterposed(t *testing.T) {
	for _, voice := range Voices() {
		mid := sentenceChunks(t, voice, oneSentence, "")
		runtime.LockOSThread()
		before := threadDraws()
		a := wholeSentence(t, mid[0], DefaultSeed)
		draws := threadDraws() - before
		runtime.UnlockOSThread()
		want := uint64(len(a.Samples))
		if mid[0].Segments != nil {
			want = 0
		}
		if draws != want {
			t.Errorf("%s: vocoding %d samples drew %d times from this thread's rand(), want %d", voice, len(a.Samples), draws, want)
		}
	}
}

// TestCDriver runs the C layer alone (testdata/cdriver/driver.c: every
// voice, the talker, the vocoder whole and streamed, text analysis and
// one-call synthesis) from two threads at once, every result bit-identical
// to a lone run's; with -args -valgrind=helgrind (or drd), under that
// thread checker, which must report no error.
func TestCDriver(t *testing.T) {
	exe := cdriver.Build(t, []string{"testdata/cdriver/driver.c", "cflite.c", "crand.c"},
		[]string{"testdata/cdriver", "."}, cdriver.Flags(t, "cgo.go"))
	t.Log(cdriver.Run(t, exe, "2"))
}
