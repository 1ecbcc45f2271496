package pipeline

// Strict decoding of the YAML tree into a Config: unknown keys, wrong types
// and floats for integers are errors with their field paths and lines.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/omnistage/omnistage/internal/engine"
)

// decoder walks a YAML node tree into a Config. It is strict: an unknown key,
// a value of the wrong type or a float where an integer belongs is an error
// naming the field path and line. It never stops at the first error.
type decoder struct {
	errs *errList
	// kindLines are the lines of the kinds the file names, by field path:
	// they are checked once the file's own kinds (pipeline.kinds) are known.
	kindLines map[string]int
}

// noID marks an id that is missing or could not be decoded; the decoder has
// already reported why.
const noID = math.MinInt32

// field is one allowed key of a mapping and what to do with its value.
type field struct {
	name string
	fn   func(n *yaml.Node, path string)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// mapping decodes a mapping node, calling each field's fn for the keys
// present, and reports unknown and duplicate keys. It returns the keys seen.
func (d *decoder) mapping(n *yaml.Node, path string, fields ...field) map[string]bool {
	seen := map[string]bool{}
	if n.Kind != yaml.MappingNode {
		d.errs.add(n.Line, path, "must be a mapping, got %s", describe(n))
		return seen
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if seen[key] {
			d.errs.add(k.Line, join(path, key), "duplicate key")
			continue
		}
		seen[key] = true
		known := false
		for _, f := range fields {
			if f.name == key {
				known = true
				f.fn(v, join(path, key))
				break
			}
		}
		if !known {
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.name
			}
			d.errs.add(k.Line, join(path, key), "unknown field (known fields: %s)", strings.Join(names, ", "))
		}
	}
	return seen
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "boolean " + n.Value
		case "!!float":
			return "float " + n.Value
		case "!!int":
			return "integer " + n.Value
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func (d *decoder) scalar(n *yaml.Node, path, tag, want string) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != tag {
		d.errs.add(n.Line, path, "must be %s, got %s", want, describe(n))
		return false
	}
	return true
}

func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if d.scalar(n, path, "!!str", "a string") {
			*dst = n.Value
		}
	}
}

func (d *decoder) kind(dst *engine.Kind) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var s string
		d.str(&s)(n, path)
		if s == "" {
			return
		}
		*dst = engine.Kind(s)
		if d.kindLines == nil {
			d.kindLines = map[string]int{}
		}
		d.kindLines[path] = n.Line
	}
}

// checkKinds refuses the kinds p names that are neither built in nor
// declared (p.Kinds), leaving their fields empty.
func (d *decoder) checkKinds(p *Pipeline) {
	check := func(path string, k *engine.Kind) {
		if *k != "" && !k.Valid() && !slices.Contains(p.Kinds, *k) {
			d.errs.add(d.kindLines[path], path, "unknown kind %q (kinds: %s)", *k, kindList(p.Kinds))
			*k = ""
		}
	}
	check("pipeline.input", &p.Input)
	for i := range p.Stages {
		path := index("pipeline.stages", i)
		check(path+".input", &p.Stages[i].Input)
		check(path+".output", &p.Stages[i].Output)
	}
}

// kindList names the built-in kinds and the declared ones.
func kindList(declared []engine.Kind) string {
	var names []string
	for _, k := range slices.Concat(engine.Kinds, declared) {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// declaredKinds decodes pipeline.kinds: a mapping of kind names to their
// (empty) descriptions.
func (d *decoder) declaredKinds(n *yaml.Node, path string, kinds *[]engine.Kind) {
	*kinds = []engine.Kind{}
	if n.Kind != yaml.MappingNode {
		d.errs.add(n.Line, path, "must be a mapping of kind names to {}, got %s", describe(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var name string
		d.str(&name)(k, path)
		kpath := join(path, k.Value)
		switch {
		case name == "":
		case engine.Kind(name).Valid():
			d.errs.add(k.Line, kpath, "%s is a built-in kind: declare only kinds of your own", name)
		case !engine.KindNameOK(name):
			d.errs.add(k.Line, kpath, "%q must be lower-case letters, digits, '.', '_' or '-', starting with a letter", name)
		case slices.Contains(*kinds, engine.Kind(name)):
			d.errs.add(k.Line, kpath, "duplicate kind")
		default:
			*kinds = append(*kinds, engine.Kind(name))
		}
		if !(v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null") {
			d.mapping(v, kpath) // no fields yet: {} or nothing
		}
	}
}

// integer decodes an integer id or count; booleans and floats are refused.
func (d *decoder) integer(n *yaml.Node, path string) (int, bool) {
	if !d.scalar(n, path, "!!int", "an integer") {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 32)
	if err != nil {
		d.errs.add(n.Line, path, "integer %s out of range", n.Value)
		return 0, false
	}
	return int(v), true
}

func (d *decoder) intTo(dst *int) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if v, ok := d.integer(n, path); ok {
			*dst = v
		}
	}
}

func (d *decoder) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if d.scalar(n, path, "!!bool", "true or false") {
			*dst = n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
		}
	}
}

func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var s string
		d.str(&s)(n, path)
		if s == "" {
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			d.errs.add(n.Line, path, "must be a positive duration such as \"10s\", got %q", s)
			return
		}
		*dst = v
	}
}

// durationOrZero is duration, where 0 (or "0s") means no time at all.
func (d *decoder) durationOrZero(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var s string
		d.str(&s)(n, path)
		if s == "" {
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			d.errs.add(n.Line, path, "must be a duration of 0 or more such as \"2ms\", got %q", s)
			return
		}
		*dst = v
	}
}

func (d *decoder) sequence(n *yaml.Node, path string, each func(n *yaml.Node, path string)) {
	if n.Kind != yaml.SequenceNode {
		d.errs.add(n.Line, path, "must be a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		each(item, index(path, i))
	}
}

func (d *decoder) config(doc *yaml.Node, c *Config) {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			d.errs.add(0, "", "empty configuration")
			return
		}
		doc = doc.Content[0]
	}
	seen := d.mapping(doc, "",
		field{"pipeline", func(n *yaml.Node, path string) { d.pipeline(n, path, &c.Pipeline) }},
		field{"deploy", func(n *yaml.Node, path string) { d.deploy(n, path, &c.Deploy) }},
		field{"voice_aliases", func(n *yaml.Node, path string) { d.voiceAliases(n, path, &c.VoiceAliases) }},
	)
	if doc.Kind == yaml.MappingNode && !seen["pipeline"] {
		d.errs.add(doc.Line, "pipeline", "missing section")
	}
}

// voiceAliases decodes a mapping of alias names to voice names.
func (d *decoder) voiceAliases(n *yaml.Node, path string, m *map[string]string) {
	*m = map[string]string{}
	if n.Kind != yaml.MappingNode {
		d.errs.add(n.Line, path, "must be a mapping of alias to voice, got %s", describe(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var alias, voice string
		d.str(&alias)(k, path)
		d.str(&voice)(v, path+"."+k.Value)
		switch {
		case alias == "" || voice == "":
			if k.ShortTag() == "!!str" && v.ShortTag() == "!!str" {
				d.errs.add(k.Line, path+"."+k.Value, "alias and voice must not be empty")
			}
		case strings.ToLower(alias) != alias:
			d.errs.add(k.Line, path+"."+alias, "write aliases in lower case: requests match voices case-insensitively")
		default:
			if _, dup := (*m)[alias]; dup {
				d.errs.add(k.Line, path+"."+alias, "alias given twice")
			}
			(*m)[alias] = voice
		}
	}
}

func (d *decoder) pipeline(n *yaml.Node, path string, p *Pipeline) {
	d.mapping(n, path,
		field{"name", d.str(&p.Name)},
		field{"input", d.kind(&p.Input)},
		field{"kinds", func(n *yaml.Node, path string) { d.declaredKinds(n, path, &p.Kinds) }},
		field{"stages", func(n *yaml.Node, path string) {
			p.Stages = []Stage{} // present, even if empty
			d.sequence(n, path, func(n *yaml.Node, path string) {
				s := Stage{ID: noID, line: n.Line}
				seen := d.mapping(n, path,
					field{"id", d.intTo(&s.ID)},
					field{"name", d.str(&s.Name)},
					field{"engine", d.str(&s.Engine)},
					field{"input", d.kind(&s.Input)},
					field{"output", d.kind(&s.Output)},
					field{"final_output", d.boolean(&s.FinalOutput)},
				)
				if n.Kind == yaml.MappingNode && !seen["id"] {
					d.errs.add(n.Line, path+".id", "missing: stage ids are 0..n-1 in order")
				}
				p.Stages = append(p.Stages, s)
			})
		}},
		field{"stage_transitions", func(n *yaml.Node, path string) {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
				return // "stage_transitions:" with no value is the same as omitting it
			}
			p.Transitions = [][2]int{}
			if n.Kind != yaml.SequenceNode {
				p.Transitions = append(p.Transitions, [2]int{noID, noID})
			}
			d.sequence(n, path, func(n *yaml.Node, path string) {
				if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
					d.errs.add(n.Line, path, "must be a [from, to] pair of stage ids, got %s", describeSeq(n))
					p.Transitions = append(p.Transitions, [2]int{noID, noID})
					p.transitionLines = append(p.transitionLines, n.Line)
					return
				}
				e := [2]int{noID, noID}
				for j := range 2 {
					if v, ok := d.integer(n.Content[j], index(path, j)); ok {
						e[j] = v
					}
				}
				p.Transitions = append(p.Transitions, e)
				p.transitionLines = append(p.transitionLines, n.Line)
			})
		}},
		field{"aligner", func(n *yaml.Node, path string) {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
				return
			}
			a := &Aligner{line: n.Line}
			d.mapping(n, path,
				field{"engine", d.str(&a.Engine)},
				field{"name", d.str(&a.Name)},
			)
			p.Aligner = a
		}},
	)
}

func describeSeq(n *yaml.Node) string {
	if n.Kind == yaml.SequenceNode {
		return fmt.Sprintf("a list of %d", len(n.Content))
	}
	return describe(n)
}

func (d *decoder) deploy(n *yaml.Node, path string, dp *Deploy) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	d.mapping(n, path,
		field{"max_inflight", d.intTo(&dp.MaxInflight)},
		field{"stream_buffer", d.intTo(&dp.StreamBuffer)},
		field{"abort_timeout", d.duration(&dp.AbortTimeout)},
		field{"max_audio_seconds", d.intTo(&dp.MaxAudioSeconds)},
		field{"max_migrations", d.intTo(&dp.MaxMigrations)},
		field{"stages", func(n *yaml.Node, path string) {
			d.sequence(n, path, func(n *yaml.Node, path string) {
				s := DeployStage{ID: noID, line: n.Line}
				var placement string
				seen := d.mapping(n, path,
					field{"id", d.intTo(&s.ID)},
					field{"replicas", d.intTo(&s.Replicas)},
					field{"placement", d.str(&placement)},
					field{"endpoints", func(n *yaml.Node, path string) {
						s.Endpoints = []string{}
						d.sequence(n, path, func(n *yaml.Node, path string) {
							var e string
							d.str(&e)(n, path)
							s.Endpoints = append(s.Endpoints, e)
						})
					}},
					field{"options", func(n *yaml.Node, path string) {
						if n.Kind != yaml.MappingNode {
							d.errs.add(n.Line, path, "must be a mapping, got %s", describe(n))
							return
						}
						var m map[string]any
						if err := n.Decode(&m); err != nil {
							d.errs.add(n.Line, path, "%v", err)
							return
						}
						s.Options = m
					}},
					field{"max_queue", d.intTo(&s.MaxQueue)},
					field{"max_inflight", d.intTo(&s.MaxInflight)},
					field{"timeout", d.duration(&s.Link.Timeout)},
					field{"warm_timeout", d.duration(&s.Link.WarmTimeout)},
					field{"health_interval", d.duration(&s.Link.HealthInterval)},
					field{"health_failures", d.intTo(&s.Link.HealthFailures)},
					field{"api_key_file", d.str(&s.Link.APIKeyFile)},
					field{"resolve_interval", d.duration(&s.Link.ResolveInterval)},
					field{"start_timeout", d.duration(&s.Worker.StartTimeout)},
					field{"stop_timeout", d.duration(&s.Worker.StopTimeout)},
					field{"max_batch", d.intTo(&s.Batch.Max)},
					field{"max_batch_delay", d.durationOrZero(&s.Batch.Delay)},
					field{"migrate", d.boolean(&s.Migrate)},
				)
				s.seen = seen
				if n.Kind == yaml.MappingNode && !seen["id"] {
					d.errs.add(n.Line, path+".id", "missing: the id of the stage this entry deploys")
				}
				s.Placement = Placement(placement)
				dp.Stages = append(dp.Stages, s)
			})
		}},
	)
}
