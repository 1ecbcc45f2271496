// Package voice says what a voice name means on this server, in one place
// for the HTTP API, the live-input WebSocket, Wyoming and the command
// line: one of the talker's own voices, or one of the pipeline's aliases
// (its voice_aliases: OpenAI's voice names by default), matched without
// regard to case.
package voice

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/quote"
)

// Set is what a voice name may name in one pipeline. It is immutable.
type Set struct {
	voices  []engine.Voice
	aliases map[string]string // lower-case alias → voice id
	entries []Entry
}

// Entry is one voice or alias of a Set, as GET /v1/audio/voices lists it.
type Entry struct {
	engine.Voice
	// AliasOf names the voice an alias stands for; empty for a voice.
	AliasOf string `json:"alias_of,omitempty"`
}

// NewSet returns the set of the talker's voices and the aliases. When
// the talker names no voices (its engine runs elsewhere and has not said
// yet), every alias is kept as given. Otherwise an alias that names none
// of the voices is an error with strict, and left out without (the
// default aliases name Flite's voices, which another talker lacks).
func NewSet(voices []engine.Voice, aliases map[string]string, strict bool) (*Set, error) {
	s := &Set{voices: voices, aliases: map[string]string{}}
	for _, v := range voices {
		s.entries = append(s.entries, Entry{Voice: v})
	}
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		target := aliases[alias]
		entry := Entry{Voice: engine.Voice{ID: alias, Name: alias}, AliasOf: target}
		if len(voices) > 0 {
			i := slices.IndexFunc(voices, func(v engine.Voice) bool { return strings.EqualFold(v.ID, target) })
			if i < 0 && !strict {
				continue
			}
			if i < 0 {
				return nil, fmt.Errorf("voice_aliases.%s: %q is not a voice of the talker (voices: %s)", alias, target, strings.Join(s.IDs(), ", "))
			}
			entry.Language, entry.Gender, target = voices[i].Language, voices[i].Gender, voices[i].ID
			entry.Name = fmt.Sprintf("%s (%s)", alias, voices[i].Name)
		}
		s.aliases[strings.ToLower(alias)] = target
		s.entries = append(s.entries, entry)
	}
	return s, nil
}

// Voices returns the talker's own voices.
func (s *Set) Voices() []engine.Voice { return s.voices }

// Entries returns the voices, then the aliases in name order.
func (s *Set) Entries() []Entry { return s.entries }

// IDs returns the ids of the talker's own voices.
func (s *Set) IDs() []string {
	ids := make([]string, len(s.voices))
	for i, v := range s.voices {
		ids[i] = v.ID
	}
	return ids
}

// Alias returns the voice the alias name stands for, if it is one.
func (s *Set) Alias(name string) (string, bool) {
	v, ok := s.aliases[strings.ToLower(name)]
	return v, ok
}

// Resolve returns the talker's voice that name stands for, or an
// *UnknownError. When the talker names no voices, a name that is not an
// alias goes to it as given (lower-cased), and it judges.
func (s *Set) Resolve(name string) (string, error) {
	if v, ok := s.Alias(name); ok {
		return v, nil
	}
	if len(s.voices) == 0 {
		return strings.ToLower(name), nil
	}
	for _, v := range s.voices {
		if strings.EqualFold(v.ID, name) {
			return v.ID, nil
		}
	}
	return "", &UnknownError{Name: name, Voices: s.IDs(), Aliases: slices.Sorted(maps.Keys(s.aliases))}
}

// UnknownError is a voice name that names nothing in a Set.
type UnknownError struct {
	Name            string
	Voices, Aliases []string
}

func (e *UnknownError) Error() string {
	aliases := ""
	if len(e.Aliases) > 0 {
		aliases = ", and the aliases " + strings.Join(e.Aliases, ", ")
	}
	return fmt.Sprintf("unknown voice %q: voices are %s%s", quote.Short(e.Name), strings.Join(e.Voices, ", "), aliases)
}

// Talker is what a Cache reads of a pipeline: its talker's voices, known
// only once a replica runs for a talker that names its own (a stage
// program says them when it starts), and whether it is ready.
// *orchestrator.Orchestrator is one.
type Talker interface {
	Voices() []engine.Voice
	Ready() bool
}

// Cache is the Set of one pipeline: made anew from its talker's voices on
// each call until the pipeline is ready, then kept.
type Cache struct {
	talker  Talker
	aliases map[string]string
	set     atomic.Pointer[Set]
}

// NewCache returns the Cache of the pipeline whose talker is t and whose
// aliases are aliases.
func NewCache(t Talker, aliases map[string]string) *Cache {
	return &Cache{talker: t, aliases: aliases}
}

// Set returns the pipeline's Set, as far as its voices are known now.
func (c *Cache) Set() *Set {
	if s := c.set.Load(); s != nil {
		return s
	}
	ready := c.talker.Ready() // before Voices: all of them are known once it is
	s, err := NewSet(c.talker.Voices(), c.aliases, false)
	if err != nil {
		panic("voice: a set that is not strict cannot fail: " + err.Error())
	}
	if ready {
		c.set.CompareAndSwap(nil, s)
	}
	return s
}
