package pipeline

// Loading a configuration: the built-in pipelines, files, and the order
// decode, defaults, validate, route; the deploy section's checks; the
// digest.

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/omnistage/omnistage/internal/engine"
)

// EngineRemote is the engine name of a stage that only ever runs on stage
// servers (placement remote): the stage servers' configuration names its
// real engine. It is the one engine name that need not be registered.
const EngineRemote = "remote"

// DefaultBuiltin is the pipeline served when no configuration is given.
const DefaultBuiltin = "tts"

// DefaultModel returns the default model of a server of the pipelines
// named names: want, which must be one of them, or, when want is "",
// DefaultBuiltin when it is served and the first otherwise.
func DefaultModel(names []string, want string) (string, error) {
	switch {
	case len(names) == 0:
		return "", errors.New("no pipeline is served")
	case want != "" && !slices.Contains(names, want):
		return "", fmt.Errorf("the default model %s is not a pipeline served here (%s)", want, strings.Join(names, ", "))
	case want != "":
		return want, nil
	case slices.Contains(names, DefaultBuiltin):
		return DefaultBuiltin, nil
	}
	return names[0], nil
}

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Builtins lists the names of the embedded pipelines.
func Builtins() []string {
	entries, _ := builtinFS.ReadDir("builtin")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// BuiltinYAML returns the text of an embedded pipeline.
func BuiltinYAML(name string) ([]byte, error) {
	data, err := builtinFS.ReadFile("builtin/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in pipeline %q (built-ins: %s)", name, strings.Join(Builtins(), ", "))
	}
	return data, nil
}

// Builtin parses an embedded pipeline.
func Builtin(name string) (*Config, error) {
	data, err := BuiltinYAML(name)
	if err != nil {
		return nil, err
	}
	return Parse(data, "builtin:"+name)
}

// Load reads and parses a configuration. A ref of the form "builtin:NAME"
// names an embedded pipeline.
func Load(ref string) (*Config, error) {
	if name, ok := strings.CutPrefix(ref, "builtin:"); ok {
		return Builtin(name)
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, ref)
}

// Parse decodes, defaults and validates a configuration of one pipeline
// and resolves its route. The error, if any, is an Errors listing every
// problem found.
func Parse(data []byte, source string) (*Config, error) {
	cs, err := ParseAll(data, source)
	if err != nil {
		return nil, err
	}
	if len(cs) > 1 {
		return nil, (&errList{file: source, errs: Errors{{File: source, Msg: fmt.Sprintf("holds %d pipelines, one per YAML document; this command takes one", len(cs))}}}).err()
	}
	return cs[0], nil
}

// ParseAll decodes, defaults and validates the configurations of a file
// that holds one pipeline per YAML document (documents separated by
// "---"), resolving each one's route. Each document is a whole
// configuration: its pipeline, deploy section and voice aliases. The
// error, if any, is an Errors listing every problem of every document,
// with the file's own line numbers.
func ParseAll(data []byte, source string) ([]*Config, error) {
	errs := &errList{file: source}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var cs []*Config
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs.add(0, "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return nil, errs.err()
		}
		cs = append(cs, parseDoc(&doc, source, errs))
	}
	if len(cs) == 0 {
		errs.add(0, "", "empty configuration")
	}
	checkNames(cs, errs)
	if err := errs.err(); err != nil {
		sortErrors(errs.errs)
		return nil, err
	}
	return cs, nil
}

// parseDoc decodes, defaults and validates the configuration of one
// document, adding its problems to errs.
func parseDoc(doc *yaml.Node, source string, errs *errList) *Config {
	before := len(errs.errs)
	c := &Config{Source: source}
	d := &decoder{errs: errs}
	d.config(doc, c)
	d.checkKinds(&c.Pipeline)
	if len(errs.errs) == before || c.Pipeline.Stages != nil {
		validate(c, errs)
	}
	if c.VoiceAliases == nil {
		c.VoiceAliases = maps.Clone(DefaultVoiceAliases)
	}
	return c
}

// checkNames refuses two pipelines of one name.
func checkNames(cs []*Config, errs *errList) {
	seen := map[string]bool{}
	for _, c := range cs {
		if n := c.Pipeline.Name; n != "" {
			if seen[n] {
				errs.add(0, "pipeline.name", "pipeline %s is declared twice; give each pipeline a name of its own", n)
			}
			seen[n] = true
		}
	}
}

// LoadAll loads the pipelines of refs, files of one or more pipelines or
// builtin:NAME, in order. Every name must be unique: an error names both
// sources of a name given twice.
func LoadAll(refs []string) ([]*Config, error) {
	var all []*Config
	var errs []error
	from := map[string]string{}
	for _, ref := range refs {
		cs, err := loadRef(ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range cs {
			if prev, dup := from[c.Pipeline.Name]; dup {
				errs = append(errs, fmt.Errorf("pipeline %s is declared in both %s and %s: give each pipeline a name of its own", c.Pipeline.Name, prev, c.Source))
				continue
			}
			from[c.Pipeline.Name] = c.Source
			all = append(all, c)
		}
	}
	return all, errors.Join(errs...)
}

// loadRef reads and parses the pipelines of one ref.
func loadRef(ref string) ([]*Config, error) {
	if name, ok := strings.CutPrefix(ref, "builtin:"); ok {
		c, err := Builtin(name)
		if err != nil {
			return nil, err
		}
		return []*Config{c}, nil
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseAll(data, ref)
}

// LoadPipeline loads the pipeline named name from ref (a file of several
// pipelines, say); with name "", ref must hold one pipeline.
func LoadPipeline(ref, name string) (*Config, error) {
	if name == "" {
		return Load(ref)
	}
	cs, err := loadRef(ref)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if c.Pipeline.Name == name {
			return c, nil
		}
	}
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Pipeline.Name
	}
	return nil, fmt.Errorf("%s holds no pipeline %s (it holds %s)", ref, name, strings.Join(names, ", "))
}

func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		li, lj := es[i].Line, es[j].Line
		if li == 0 || lj == 0 {
			return false
		}
		return li < lj
	})
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// validate applies defaults and checks everything the decoder could not.
func validate(c *Config, errs *errList) {
	p := &c.Pipeline
	if p.Name == "" {
		errs.add(0, "pipeline.name", "missing: give the pipeline a name")
	} else if !nameRE.MatchString(p.Name) {
		errs.add(0, "pipeline.name", "%q must be letters, digits, '.', '_' or '-'", p.Name)
	}
	if p.Input == "" {
		errs.add(0, "pipeline.input", "missing: the kind of input a request carries (%s)", kindList(p.Kinds))
	}
	if len(p.Stages) == 0 {
		errs.add(0, "pipeline.stages", "missing: a pipeline needs at least one stage")
		return
	}
	stagesOK := true
	names := map[string]int{}
	for i := range p.Stages {
		s := &p.Stages[i]
		path := index("pipeline.stages", i)
		switch {
		case s.ID == noID:
			stagesOK = false
		case s.ID != i:
			errs.add(s.line, path+".id", "stage ids must be 0..%d in order: got %d at position %d, want %d", len(p.Stages)-1, s.ID, i, i)
			stagesOK = false
		}
		if s.Name == "" {
			errs.add(s.line, path+".name", "missing: every stage needs a name")
		} else if j, dup := names[s.Name]; dup {
			errs.add(s.line, path+".name", "duplicate stage name %q (also stage %d)", s.Name, j)
		} else {
			names[s.Name] = i
		}
		checkEngine(errs, s.line, path+".engine", s.Engine)
		if s.Input == "" {
			errs.add(s.line, path+".input", "missing: the kind this stage takes (%s)", kindList(p.Kinds))
		}
		if s.Output == "" {
			errs.add(s.line, path+".output", "missing: the kind this stage produces (%s)", kindList(p.Kinds))
		}
	}
	if a := p.Aligner; a != nil {
		checkEngine(errs, a.line, "pipeline.aligner.engine", a.Engine)
		if a.Name == "" {
			a.Name = "aligner"
		}
		if _, dup := names[a.Name]; dup {
			errs.add(a.line, "pipeline.aligner.name", "duplicate stage name %q", a.Name)
		}
	}
	if stagesOK {
		c.Route = resolveRoute(p, errs)
	}
	validateDeploy(c, errs)
}

func checkEngine(errs *errList, line int, path, name string) {
	if name == "" {
		errs.add(line, path, "missing: the engine that computes this stage")
	}
}

// Digest identifies the pipeline and its route: two servers agree on a
// payload only when their digests match.
func (c *Config) Digest() [32]byte {
	type stage struct {
		ID                    int
		Name, Engine, In, Out string
		Final                 bool
	}
	v := struct {
		Name    string
		Input   engine.Kind
		Stages  []stage
		Chain   []int
		Aligner string
		Kinds   []engine.Kind `json:",omitempty"`
	}{Name: c.Pipeline.Name, Input: c.Pipeline.Input, Kinds: c.Pipeline.Kinds}
	for _, s := range c.Pipeline.Stages {
		v.Stages = append(v.Stages, stage{s.ID, s.Name, s.Engine, string(s.Input), string(s.Output), s.FinalOutput})
	}
	if c.Route != nil {
		v.Chain = c.Route.chain
	}
	if a := c.Pipeline.Aligner; a != nil {
		v.Aligner = a.Engine
	}
	data, _ := json.Marshal(v)
	return sha256.Sum256(data)
}
