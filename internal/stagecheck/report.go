package stagecheck

// The report: each case's result, what the stage said it is, and the
// text a person reads.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// Status is a case's outcome.
type Status string

// The statuses. Only Fail fails the battery: Warn is a behaviour the
// protocol allows but a stage should not have (output with no end of
// sentence, input of the wrong kind taken), Skip a case that could not
// apply (a stage that runs one job at a time has no concurrent case).
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Result is one case's outcome.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says what the case expected and what happened.
	Detail string `json:"detail"`
	// Stderr is the last lines the program wrote on its standard error
	// during the case, when the case failed.
	Stderr []string `json:"stderr,omitempty"`
	// Seconds is how long the case took.
	Seconds float64 `json:"seconds"`
}

// Stage is what the program's hello says it is.
type Stage struct {
	Name    string      `json:"name"`
	Input   engine.Kind `json:"input"`
	Output  engine.Kind `json:"output"`
	MaxJobs int         `json:"max_jobs"`
	Window  int         `json:"window"`
	// MaxBatch is the most jobs a batch may hold; 0 when the stage takes
	// jobs, not batches.
	MaxBatch int                             `json:"max_batch,omitempty"`
	Params   map[string]stageproto.ParamInfo `json:"params,omitempty"`
	Voices   []engine.Voice                  `json:"voices,omitempty"`
}

// paramNames returns the names of the params the stage declares, sorted.
func (s *Stage) paramNames() []string {
	names := make([]string, 0, len(s.Params))
	for k := range s.Params {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// String describes the stage in a line: "gain takes audio, makes audio, 2
// jobs at once (input window 8); params: gain; voices: en-us".
func (s *Stage) String() string {
	name := s.Name
	if name == "" {
		name = "an unnamed stage"
	}
	jobs := "1 job at a time"
	if s.MaxJobs > 1 {
		jobs = fmt.Sprintf("%d jobs at once", s.MaxJobs)
	}
	line := fmt.Sprintf("%s takes %s, makes %s, %s (input window %d)", name, s.Input, s.Output, jobs, s.Window)
	if s.MaxBatch > 0 {
		batches := "1 batch at a time"
		if s.MaxJobs > 1 {
			batches = fmt.Sprintf("%d batches at once", s.MaxJobs)
		}
		line = fmt.Sprintf("%s takes %s, makes %s, in batches of up to %d jobs, %s", name, s.Input, s.Output, s.MaxBatch, batches)
	}
	if len(s.Params) > 0 {
		line += "; params: " + strings.Join(s.paramNames(), ", ")
	}
	if len(s.Voices) > 0 {
		ids := make([]string, len(s.Voices))
		for i, v := range s.Voices {
			ids[i] = v.ID
		}
		line += "; voices: " + strings.Join(ids, ", ")
	}
	return line
}

// Report is the battery's outcome.
type Report struct {
	Command []string `json:"command"`
	// Stage is what the program said it is; nil when its hello was not
	// valid.
	Stage *Stage   `json:"stage"`
	Cases []Result `json:"cases"`
	// Interrupted is set when the caller's context ended the battery
	// before every case ran.
	Interrupted bool    `json:"interrupted"`
	Seconds     float64 `json:"seconds"`
	Summary     Summary `json:"summary"`
	// OK is set when no case failed and the battery ran to its end.
	OK bool `json:"ok"`
}

// Summary counts the cases by status.
type Summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Warned  int `json:"warned"`
	Skipped int `json:"skipped"`
}

// Case returns the result of the case called name, or nil.
func (r *Report) Case(name string) *Result {
	for i := range r.Cases {
		if r.Cases[i].Name == name {
			return &r.Cases[i]
		}
	}
	return nil
}

// Failed names the cases that failed, in order.
func (r *Report) Failed() []string {
	var names []string
	for _, c := range r.Cases {
		if c.Status == Fail {
			names = append(names, c.Name)
		}
	}
	return names
}

// finish counts the cases and sets OK.
func (r *Report) finish(took time.Duration) {
	r.Seconds = seconds(took)
	r.Summary = Summary{}
	for _, c := range r.Cases {
		switch c.Status {
		case Pass:
			r.Summary.Passed++
		case Fail:
			r.Summary.Failed++
		case Warn:
			r.Summary.Warned++
		case Skip:
			r.Summary.Skipped++
		}
	}
	r.OK = r.Summary.Failed == 0 && !r.Interrupted
}

// SummaryLine is the report's last line of text: "12 passed, 1 failed
// (cancel), 0 warned, 0 skipped in 3.2s".
func (r *Report) SummaryLine() string {
	s := r.Summary
	failed := fmt.Sprint(s.Failed, " failed")
	if s.Failed > 0 {
		failed += " (" + strings.Join(r.Failed(), ", ") + ")"
	}
	line := fmt.Sprintf("%d passed, %s, %d warned, %d skipped in %.1fs", s.Passed, failed, s.Warned, s.Skipped, r.Seconds)
	if r.Interrupted {
		line += "; interrupted"
	}
	return line
}

// WriteText writes the result as text: a line "FAIL cancel: no answer to
// cancel within 5s", then the program's last lines of standard error,
// indented.
func (c *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s %s: %s\n", strings.ToUpper(string(c.Status)), c.Name, c.Detail)
	for _, l := range c.Stderr {
		fmt.Fprintf(w, "     stderr: %s\n", l)
	}
}

func seconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// The results a case returns.

func pass(format string, args ...any) Result {
	return Result{Status: Pass, Detail: fmt.Sprintf(format, args...)}
}

func fail(format string, args ...any) Result {
	return Result{Status: Fail, Detail: fmt.Sprintf(format, args...)}
}

func warn(format string, args ...any) Result {
	return Result{Status: Warn, Detail: fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) Result {
	return Result{Status: Skip, Detail: fmt.Sprintf(format, args...)}
}
