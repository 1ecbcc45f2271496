package voice

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

var flite = []engine.Voice{{ID: "slt", Name: "SLT", Language: "en-US", Gender: "female"}, {ID: "rms", Name: "RMS", Language: "en-US", Gender: "male"}}

func TestResolve(t *testing.T) {
	s, err := NewSet(flite, map[string]string{"Alloy": "slt", "echo": "rms", "nova": "kal"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want, err string }{
		{"slt", "slt", ""},
		{"RMS", "rms", ""},
		{"alloy", "slt", ""},
		{"ECHO", "rms", ""},
		{"nova", "", `unknown voice "nova": voices are slt, rms, and the aliases alloy, echo`},
		{"hal", "", `unknown voice "hal"`},
	} {
		got, err := s.Resolve(tc.name)
		if tc.err != "" {
			var ue *UnknownError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Resolve(%q) = %q, %v; want an *UnknownError with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if n := len(s.Entries()); n != 4 {
		t.Errorf("%d entries, want 2 voices and 2 aliases: %+v", n, s.Entries())
	}
}

func TestStrict(t *testing.T) {
	if _, err := NewSet(flite, map[string]string{"nova": "kal"}, true); err == nil || !strings.Contains(err.Error(), `voice_aliases.nova: "kal" is not a voice`) {
		t.Errorf("strict set with an alias of no voice: %v", err)
	}
}

func TestVoicesUnknown(t *testing.T) {
	s, err := NewSet(nil, map[string]string{"alloy": "Af_Heart"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"ALLOY": "Af_Heart", "Bm_Lewis": "bm_lewis"} {
		if got, err := s.Resolve(name); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}
