package pipeline

// The deploy section's checks and defaults, and the check of a
// configuration against the engines of the program that runs it.

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/defaults"
	"github.com/omnistage/omnistage/internal/engine"
)

// Engines are the engines of the program that runs a configuration, as
// CheckEngines sees them; *engine.Registry is one.
type Engines interface {
	// Lookup returns the driver of the engine named name.
	Lookup(name string) (engine.Driver, bool)
	// Names lists the engines' names, sorted.
	Names() []string
}

var _ Engines = (*engine.Registry)(nil)

// CheckEngines checks the configuration against the engines of the
// program that runs it: every stage's engine (the aligner's included)
// must be one of them, and a deploy key that the stage's placement does
// not take must be one its engine takes (engine.Driver.DeployKeys).
// EngineRemote needs no engine; Parse has already required placement
// remote for it. The error, if any, is an Errors naming each fault's
// file, line and field.
func (c *Config) CheckEngines(engines Engines) error {
	errs := &errList{file: c.Source}
	check := func(id, line int, path, name string) {
		if name == EngineRemote {
			return
		}
		d, ok := engines.Lookup(name)
		if !ok {
			errs.add(line, path, "unknown engine %q (engines: %s)", name, strings.Join(engines.Names(), ", "))
			return
		}
		for _, k := range d.DeployKeys {
			if dk := findKey(k); dk == nil || !dk.engine {
				errs.add(line, path, "engine %s takes the deploy key %q, which is not one an engine may take (%s)", name, k, strings.Join(engineKeyNames(), ", "))
			}
		}
		if id >= len(c.Deploy.Stages) {
			return
		}
		s := &c.Deploy.Stages[id]
		for _, k := range s.engineKeys {
			if !slices.Contains(d.DeployKeys, k.name) {
				errs.add(s.line, s.path+"."+k.name, "%s (placement is %s)", k.refusedBy[s.Placement], s.Placement)
			}
		}
	}
	for i, s := range c.Pipeline.Stages {
		check(i, s.line, index("pipeline.stages", i)+".engine", s.Engine)
	}
	if a := c.Pipeline.Aligner; a != nil {
		check(len(c.Pipeline.Stages), a.line, "pipeline.aligner.engine", a.Engine)
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
	positive(&d.MaxMigrations, DefaultMaxMigrations, "deploy.max_migrations")
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
	s.path = path
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
	switch {
	case s.Batch.Max == 0:
		s.Batch.Max = DefaultMaxBatch
	case s.Batch.Max < 0:
		errs.add(s.line, path+".max_batch", "must be at least 1 (1: no batches), got %d", s.Batch.Max)
	}
	if !s.seen["max_batch_delay"] {
		s.Batch.Delay = DefaultMaxBatchDelay
	}
	if !s.seen["migrate"] {
		s.Migrate = true
	}
	validatePlacementKeys(s, path, errs)
}

// deployKey is a key of a stage's deploy entry that not every stage
// takes.
type deployKey struct {
	name string
	// refusedBy holds the placements that do not take the key, each with
	// why.
	refusedBy map[Placement]string
	// engine says that an engine may take the key whatever the stage's
	// placement, by naming it in engine.Driver.DeployKeys: its value
	// reaches the engine in engine.Spec. Parse leaves such a key on a
	// placement that refuses it to CheckEngines, which knows the engine.
	engine bool
}

// Why the placements refuse a key.
const (
	onlyOutside = "only for placement process or remote, whose replicas run outside this process"
	onlyProcess = "only for placement process"
	keyOfRemote = "only for placement remote: a worker process gets a fresh key from its parent"
	foundRemote = "only for placement remote: worker processes are not found by name"
	onlyBatcher = "only for a stage whose engine batches the units of work of several requests"
	onlyReplays = "only for a stage whose engine can replay a request from a unit boundary on another replica"
)

// deployKeys are the keys that not every stage takes.
var deployKeys = []deployKey{
	{name: "timeout", refusedBy: map[Placement]string{PlacementInproc: onlyOutside}, engine: true},
	{name: "warm_timeout", refusedBy: map[Placement]string{PlacementInproc: onlyOutside}, engine: true},
	{name: "health_interval", refusedBy: map[Placement]string{PlacementInproc: onlyOutside}},
	{name: "health_failures", refusedBy: map[Placement]string{PlacementInproc: onlyOutside}},
	{name: "api_key_file", refusedBy: map[Placement]string{PlacementInproc: onlyOutside, PlacementProcess: keyOfRemote}},
	{name: "resolve_interval", refusedBy: map[Placement]string{PlacementInproc: onlyOutside, PlacementProcess: foundRemote}},
	{name: "start_timeout", refusedBy: map[Placement]string{PlacementInproc: onlyProcess, PlacementRemote: onlyProcess}},
	{name: "stop_timeout", refusedBy: map[Placement]string{PlacementInproc: onlyProcess, PlacementRemote: onlyProcess}},
	{name: "max_batch", refusedBy: map[Placement]string{PlacementInproc: onlyBatcher, PlacementProcess: onlyBatcher, PlacementRemote: onlyBatcher}, engine: true},
	{name: "max_batch_delay", refusedBy: map[Placement]string{PlacementInproc: onlyBatcher, PlacementProcess: onlyBatcher, PlacementRemote: onlyBatcher}, engine: true},
	{name: "migrate", refusedBy: map[Placement]string{PlacementInproc: onlyReplays, PlacementProcess: onlyReplays, PlacementRemote: onlyReplays}, engine: true},
}

// findKey returns the deploy key named name, or nil.
func findKey(name string) *deployKey {
	for i := range deployKeys {
		if deployKeys[i].name == name {
			return &deployKeys[i]
		}
	}
	return nil
}

// engineKeyNames lists the keys an engine may take.
func engineKeyNames() []string {
	var names []string
	for _, k := range deployKeys {
		if k.engine {
			names = append(names, k.name)
		}
	}
	return names
}

// validatePlacementKeys refuses the keys the stage's placement does not
// take (leaving to CheckEngines those its engine may take), and fills in
// the defaults of the placement's own.
func validatePlacementKeys(s *DeployStage, path string, errs *errList) {
	for i := range deployKeys {
		k := &deployKeys[i]
		why, refused := k.refusedBy[s.Placement]
		switch {
		case !refused || !s.seen[k.name]:
		case k.engine:
			s.engineKeys = append(s.engineKeys, k)
		default:
			errs.add(s.line, path+"."+k.name, "%s (placement is %s)", why, s.Placement)
		}
	}
	switch s.Placement {
	case PlacementProcess:
		defaults.Set(&s.Worker.StartTimeout, DefaultStartTimeout)
		defaults.Set(&s.Worker.StopTimeout, DefaultStopTimeout)
	case PlacementRemote:
		defaults.Set(&s.Link.ResolveInterval, DefaultResolveInterval)
	default:
		return
	}
	defaults.Set(&s.Link.WarmTimeout, DefaultWarmTimeout)
	defaults.Set(&s.Link.HealthInterval, DefaultHealthInterval)
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
