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
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/omnistage/omnistage/internal/engine"
)

// EngineRemote is the engine name of a stage that only ever runs on stage
// servers (placement remote): the stage servers' configuration names its
// real engine. It is the one engine name that need not be registered.
const EngineRemote = "remote"

// EngineExternal is the engine name of a stage whose replicas are programs
// speaking the stage protocol: its deploy entry may bound them with
// timeout and warm_timeout whatever its placement.
const EngineExternal = "external"

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

// CheckEngines checks every stage's engine name (the aligner's included)
// against the engines this program has: known reports whether a name is
// registered. EngineRemote needs no registration; Parse has already
// required placement remote for it. The error, if any, is an Errors
// naming each unknown engine's file, line and field, and the known ones.
func (c *Config) CheckEngines(known func(name string) bool, names []string) error {
	errs := &errList{file: c.Source}
	check := func(line int, path, name string) {
		if name != EngineRemote && !known(name) {
			errs.add(line, path, "unknown engine %q (engines: %s)", name, strings.Join(names, ", "))
		}
	}
	for i, s := range c.Pipeline.Stages {
		check(s.line, index("pipeline.stages", i)+".engine", s.Engine)
	}
	if a := c.Pipeline.Aligner; a != nil {
		check(a.line, "pipeline.aligner.engine", a.Engine)
	}
	return errs.err()
}

func validateDeploy(c *Config, errs *errList) {
	d := &c.Deploy
	positive := func(v *int, def int, path string) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			errs.add(0, path, "must be at least 1, got %d", *v)
		}
	}
	positive(&d.MaxInflight, DefaultMaxInflight, "deploy.max_inflight")
	positive(&d.StreamBuffer, DefaultStreamBuffer, "deploy.stream_buffer")
	positive(&d.MaxAudioSeconds, DefaultMaxAudioSeconds, "deploy.max_audio_seconds")
	if d.AbortTimeout == 0 {
		d.AbortTimeout = DefaultAbortTimeout
	}

	n := len(c.Pipeline.Stages)
	total := n
	if c.Pipeline.Aligner != nil {
		total++
	}
	byID := make([]*DeployStage, total)
	for i := range d.Stages {
		s := &d.Stages[i]
		path := index("deploy.stages", i)
		switch {
		case s.ID == noID:
			continue
		case s.ID < 0 || s.ID >= total:
			errs.add(s.line, path+".id", "no stage %d (%s)", s.ID, idRange(n, c.Pipeline.Aligner != nil))
			continue
		case byID[s.ID] != nil:
			errs.add(s.line, path+".id", "stage %d is deployed twice", s.ID)
			continue
		}
		byID[s.ID] = s
		validateDeployStage(s, path, engineOf(&c.Pipeline, s.ID), errs)
	}
	full := make([]DeployStage, total)
	for id := range total {
		if byID[id] != nil {
			full[id] = *byID[id]
			continue
		}
		full[id] = DeployStage{ID: id}
		validateDeployStage(&full[id], fmt.Sprintf("deploy.stages (stage %d)", id), engineOf(&c.Pipeline, id), errs)
	}
	d.Stages = full
}

// engineOf returns the engine of stage id, the aligner included.
func engineOf(p *Pipeline, id int) string {
	if id < len(p.Stages) {
		return p.Stages[id].Engine
	}
	return p.Aligner.Engine
}

func idRange(n int, aligner bool) string {
	if aligner {
		return fmt.Sprintf("stage ids are 0..%d; %d is the aligner", n-1, n)
	}
	return fmt.Sprintf("stage ids are 0..%d", n-1)
}

func validateDeployStage(s *DeployStage, path, engineName string, errs *errList) {
	if s.Placement == "" {
		s.Placement = PlacementInproc
		if engineName == EngineRemote {
			s.Placement = PlacementRemote
		}
	}
	switch s.Placement {
	case PlacementInproc, PlacementProcess:
		if engineName == EngineRemote {
			errs.add(s.line, path+".placement", "engine remote runs only with placement remote, got %s", s.Placement)
		}
		if s.Endpoints != nil {
			errs.add(s.line, path+".endpoints", "endpoints are only for placement remote (placement is %s)", s.Placement)
		}
	case PlacementRemote:
		if len(s.Endpoints) == 0 {
			errs.add(s.line, path+".endpoints", "missing: placement remote needs at least one endpoint URL")
		}
		for i, e := range s.Endpoints {
			u, err := url.Parse(e)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs.add(s.line, index(path+".endpoints", i), "%q is not an http:// or https:// URL", e)
			}
		}
		if s.Replicas != 0 && s.Replicas != len(s.Endpoints) {
			errs.add(s.line, path+".replicas", "placement remote has one replica per endpoint address: %d endpoints but replicas is %d", len(s.Endpoints), s.Replicas)
		}
		if len(s.Endpoints) > 0 {
			s.Replicas = len(s.Endpoints)
		}
	default:
		errs.add(s.line, path+".placement", "unknown placement %q (placements: inproc, process, remote)", s.Placement)
	}
	switch {
	case s.Replicas == 0:
		s.Replicas = DefaultReplicas
	case s.Replicas < 0 || s.Replicas > 64:
		errs.add(s.line, path+".replicas", "must be 1..64, got %d", s.Replicas)
	}
	switch {
	case s.MaxQueue == 0:
		s.MaxQueue = DefaultStageMaxQueue
	case s.MaxQueue < 0:
		errs.add(s.line, path+".max_queue", "must be at least 1, got %d", s.MaxQueue)
	}
	switch {
	case s.MaxInflight == 0:
		s.MaxInflight = DefaultStageMaxInflight
	case s.MaxInflight < 0:
		errs.add(s.line, path+".max_inflight", "must be at least 1, got %d", s.MaxInflight)
	}
	validatePlacementKeys(s, path, engineName, errs)
}

// The deploy keys that only some placements take.
var (
	hopKeys    = []string{"timeout", "warm_timeout", "health_interval", "health_failures", "api_key_file", "resolve_interval"} // the first two also for engine external
	workerKeys = []string{"start_timeout", "stop_timeout"}
)

// validatePlacementKeys refuses the keys of another placement and fills in
// the defaults of the stage's own.
func validatePlacementKeys(s *DeployStage, path, engineName string, errs *errList) {
	refuse := func(keys []string, why string) {
		for _, k := range keys {
			if s.seen[k] {
				errs.add(s.line, path+"."+k, "%s (placement is %s)", why, s.Placement)
			}
		}
	}
	switch s.Placement {
	case PlacementInproc:
		keys := hopKeys
		if engineName == EngineExternal {
			// They bound the stage's programs, which run outside this
			// process whatever its placement.
			keys = hopKeys[2:]
			defaultTo(&s.Link.WarmTimeout, DefaultWarmTimeout)
		}
		refuse(keys, "only for placement process or remote, whose replicas run outside this process")
		refuse(workerKeys, "only for placement process")
		return
	case PlacementProcess:
		refuse([]string{"api_key_file"}, "only for placement remote: a worker process gets a fresh key from its parent")
		refuse([]string{"resolve_interval"}, "only for placement remote: worker processes are not found by name")
		defaultTo(&s.Worker.StartTimeout, DefaultStartTimeout)
		defaultTo(&s.Worker.StopTimeout, DefaultStopTimeout)
	case PlacementRemote:
		refuse(workerKeys, "only for placement process")
		defaultTo(&s.Link.ResolveInterval, DefaultResolveInterval)
	default:
		return
	}
	defaultTo(&s.Link.WarmTimeout, DefaultWarmTimeout)
	defaultTo(&s.Link.HealthInterval, DefaultHealthInterval)
	switch {
	case !s.seen["health_failures"]:
		s.Link.HealthFailures = DefaultHealthFailures
	case s.Link.HealthFailures < 1:
		errs.add(s.line, path+".health_failures", "must be at least 1, got %d", s.Link.HealthFailures)
	}
	if s.seen["api_key_file"] && s.Link.APIKeyFile == "" {
		errs.add(s.line, path+".api_key_file", "empty: name the file that holds the stage servers' API key")
	}
}

func defaultTo(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
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
