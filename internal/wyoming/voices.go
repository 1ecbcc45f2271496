package wyoming

// The voices the server lists and speaks with: those of every pipeline
// that takes text and makes audio, the default pipeline's by their own
// names and the others' prefixed with their pipeline's, and the choice of
// a pipeline and a voice for a synthesis.

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/voice"
)

// programName names the info event's program: Home Assistant names its
// text-to-speech entity after it.
const programName = "omnistage"

// programURL is where the program comes from.
const programURL = "https://github.com/omnistage/omnistage"

// engineURLs are where the talkers' engines come from, by the start of
// their names; another engine's voices are attributed to the program.
var engineURLs = map[string]string{"flite": "http://www.festvox.org/flite/"}

// engineURL returns where engine comes from.
func engineURL(engine string) string {
	for prefix, url := range engineURLs {
		if strings.HasPrefix(engine, prefix) {
			return url
		}
	}
	return programURL
}

// programVersion is the program's version, as the binary was built: its
// module version, else its commit, else "devel".
var programVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return strings.TrimPrefix(v, "v")
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel+" + s.Value[:12]
		}
	}
	return "devel"
})

// target is a pipeline the server speaks with.
type target struct {
	name string
	orch *orchestrator.Orchestrator
	// talker is the engine of the route's first stage, which a voice is
	// attributed to.
	talker string
	def    bool
	voices *voice.Cache
}

// voiceEntry is one voice the server lists: a pipeline's talker's voice
// (Voice.ID empty: the talker's own default, for a talker that names no
// voices).
type voiceEntry struct {
	name   string
	target *target
	voice  engine.Voice
}

// catalog is the pipelines the server speaks with, the default first.
type catalog struct {
	targets []*target
}

// newCatalog returns the catalog of the pipelines of orchs that take text
// and make audio. The default is the pipeline named def, or, for "", the
// built-in default pipeline when served, else the first one (as the HTTP
// API picks its default model); when that one takes no text or makes no
// audio, the first that does.
func newCatalog(orchs []*orchestrator.Orchestrator, def string) (*catalog, error) {
	var names []string
	for _, o := range orchs {
		names = append(names, o.Config().Pipeline.Name)
	}
	def, err := pipeline.DefaultModel(names, def)
	if err != nil {
		return nil, fmt.Errorf("wyoming: %w", err)
	}
	c := &catalog{}
	for _, o := range orchs {
		cfg := o.Config()
		if cfg.Pipeline.Input != engine.KindText || !cfg.Route.Produces(engine.KindAudio) {
			continue
		}
		talker, _ := cfg.StageSpec(cfg.Route.Chain()[0], 0)
		t := &target{name: cfg.Pipeline.Name, orch: o, talker: talker, def: cfg.Pipeline.Name == def, voices: voice.NewCache(o, cfg.VoiceAliases)}
		if t.def {
			c.targets = append([]*target{t}, c.targets...)
		} else {
			c.targets = append(c.targets, t)
		}
	}
	if len(c.targets) == 0 {
		return nil, fmt.Errorf("wyoming: none of the pipelines served here (%s) takes text and makes audio", strings.Join(names, ", "))
	}
	c.targets[0].def = true
	return c, nil
}

// entries lists the voices, the default pipeline's first. They are read
// anew each time: a talker that names its voices when it starts has them
// only once its pipeline is ready.
func (c *catalog) entries() []voiceEntry {
	var list []voiceEntry
	for _, t := range c.targets {
		voices := t.voices.Set().Voices()
		if len(voices) == 0 {
			list = append(list, voiceEntry{name: t.name, target: t})
			continue
		}
		for _, v := range voices {
			name := v.ID
			if !t.def {
				name = t.name + "/" + v.ID
			}
			list = append(list, voiceEntry{name: name, target: t, voice: v})
		}
	}
	return list
}

// info returns the info event's data.
func (c *catalog) info() infoData {
	var names []string
	for _, t := range c.targets {
		names = append(names, t.name)
	}
	version := programVersion()
	prog := ttsProgram{
		Name:                        programName,
		Attribution:                 attribution{Name: programName, URL: programURL},
		Version:                     &version,
		Installed:                   true,
		Description:                 "omnistage: the pipelines " + strings.Join(names, ", "),
		SupportsSynthesizeStreaming: true,
		Voices:                      []ttsVoice{},
	}
	for _, e := range c.entries() {
		langs := []string{}
		if e.voice.Language != "" {
			langs = append(langs, e.voice.Language)
		}
		prog.Voices = append(prog.Voices, ttsVoice{Name: e.name, Attribution: attribution{Name: e.target.talker, URL: engineURL(e.target.talker)},
			Installed: true, Description: e.description(), Languages: langs, Version: &version})
	}
	return infoData{ASR: []struct{}{}, TTS: []ttsProgram{prog}, Handle: []struct{}{}, Intent: []struct{}{},
		Wake: []struct{}{}, Mic: []struct{}{}, Snd: []struct{}{}}
}

// description is what a client shows of the voice.
func (e voiceEntry) description() string {
	d := e.voice.Name
	switch {
	case e.voice.ID == "":
		d = "the talker's own voice"
	case d == "":
		d = e.voice.ID
	}
	if e.voice.Gender != "" {
		d += ", " + e.voice.Gender
	}
	if !e.target.def || e.voice.ID == "" {
		d += " (pipeline " + e.target.name + ")"
	}
	return d
}

// resolve returns the pipeline and the talker's voice ("": its default)
// that ref asks for: a voice by its listed name, a pipeline by its name
// (with its default voice) or an alias of a pipeline's voice (the default
// pipeline's by its name, another's as "pipeline/alias", as its voices
// are listed), else the first voice that speaks ref's language, else the
// default pipeline's default voice.
func (c *catalog) resolve(ref voiceRef) (*target, string, error) {
	switch {
	case ref.Name != "":
		entries := c.entries()
		for _, e := range entries {
			if strings.EqualFold(e.name, ref.Name) {
				return e.target, e.voice.ID, nil
			}
		}
		for _, t := range c.targets {
			if strings.EqualFold(t.name, ref.Name) {
				return t, "", nil
			}
		}
		if t, v, ok := c.alias(ref.Name); ok {
			return t, v, nil
		}
		return nil, "", fmt.Errorf("unknown voice %q: the voices are %s", quote.Short(ref.Name), listNames(entries))
	case ref.Language != "":
		entries := c.entries()
		for _, e := range entries {
			if speaks(e.voice.Language, ref.Language) {
				return e.target, e.voice.ID, nil
			}
		}
		return nil, "", fmt.Errorf("no voice speaks %q: the voices are %s", quote.Short(ref.Language), listNames(entries))
	}
	return c.targets[0], "", nil
}

// alias returns the pipeline and voice that name stands for as an alias.
func (c *catalog) alias(name string) (*target, string, bool) {
	t := c.targets[0]
	if p, rest, ok := strings.Cut(name, "/"); ok {
		i := slices.IndexFunc(c.targets, func(t *target) bool { return strings.EqualFold(t.name, p) })
		if i < 0 {
			return nil, "", false
		}
		t, name = c.targets[i], rest
	}
	v, ok := t.voices.Set().Alias(name)
	return t, v, ok
}

// speaks reports whether a voice of language have speaks want: the same
// tag, or want is a prefix of it ("en" of "en-US"), "_" and "-" alike.
func speaks(have, want string) bool {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }
	have, want = norm(have), norm(want)
	return have != "" && (have == want || strings.HasPrefix(have, want+"-"))
}

func listNames(entries []voiceEntry) string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
		if e.voice.Language != "" {
			names[i] += " (" + e.voice.Language + ")"
		}
	}
	return strings.Join(names, ", ")
}
