package stagecheck

// What a hello must hold: the protocol's version, kinds, counts, params
// and voices, each well-formed.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// language is a BCP 47 tag's shape: a language, then subtags.
var language = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)

// checkHello returns the stage a hello describes, its defaults applied, or
// the list of what is wrong with it.
func checkHello(h *stageproto.Header) (*Stage, []string) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if h.Protocol != stageproto.Version {
		bad("protocol %d: this runtime speaks %d", h.Protocol, stageproto.Version)
	}
	for _, k := range []struct{ field, kind string }{{"input", h.Input}, {"output", h.Output}} {
		if p := kindProblem(k.kind); p != "" {
			bad("%s: %s", k.field, p)
		}
	}
	if h.MaxJobs < 0 {
		bad("max_jobs %d is negative", h.MaxJobs)
	}
	if h.Window < 0 {
		bad("window %d is negative", h.Window)
	}
	if h.MaxBatch < 0 {
		bad("max_batch %d is negative", h.MaxBatch)
	}
	s := &Stage{Name: h.Name, Input: engine.Kind(h.Input), Output: engine.Kind(h.Output),
		MaxJobs: max(h.MaxJobs, 0), Window: max(h.Window, 0), MaxBatch: max(h.MaxBatch, 0), Voices: h.Voices}
	if s.MaxJobs == 0 {
		s.MaxJobs = stageproto.DefaultMaxJobs
	}
	if s.Window == 0 {
		s.Window = stageproto.DefaultWindow
	}
	if len(h.Params) > 0 && string(h.Params) != "null" {
		if err := json.Unmarshal(h.Params, &s.Params); err != nil {
			bad("params must be an object of param names to {\"type\", \"description\"} (strings): %v", err)
		}
		for name := range s.Params {
			if strings.TrimSpace(name) == "" {
				bad("params: a param with an empty name")
			}
		}
	}
	problems = append(problems, voiceProblems(h.Voices)...)
	return s, problems
}

// kindProblem says what is wrong with a hello's kind, or "".
func kindProblem(kind string) string {
	k := engine.Kind(kind)
	switch {
	case kind == "":
		return "missing: name the kind of data the stage takes or makes"
	case k.Valid() || engine.KindNameOK(kind):
		return ""
	}
	return fmt.Sprintf("%q is not a kind: the built-in ones are %s, and a pipeline's own are lower-case letters, digits, '.', '_' or '-', starting with a letter", kind, kindNames())
}

func kindNames() string {
	names := make([]string, len(engine.Kinds))
	for i, k := range engine.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// voiceProblems says what is wrong with a hello's voices.
func voiceProblems(voices []engine.Voice) []string {
	var problems []string
	seen := map[string]bool{}
	for i, v := range voices {
		where := fmt.Sprintf("voices[%d]", i)
		if v.ID != "" {
			where = fmt.Sprintf("voice %q", v.ID)
		}
		switch {
		case v.ID == "":
			problems = append(problems, where+": no id")
		case seen[v.ID]:
			problems = append(problems, where+": the id is used twice")
		}
		seen[v.ID] = true
		if v.Name == "" {
			problems = append(problems, where+": no name")
		}
		if !language.MatchString(v.Language) {
			problems = append(problems, fmt.Sprintf("%s: language %q is not a BCP 47 tag (en-US)", where, v.Language))
		}
	}
	return problems
}
