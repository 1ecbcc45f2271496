package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary YAML to Parse: it must never panic, every
// failure must be an Errors list, and every success must obey the route rules.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, name := range Builtins() {
		data, _ := BuiltinYAML(name)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
			return
		}
		checkRouteInvariants(t, c)
		for _, m := range [][]string{nil, {"audio"}, {"timestamps"}, {"audio", "timestamps"}, {"frames"}} {
			s, err := c.Route.Select(m)
			if err != nil {
				continue
			}
			if s.Stages[0] != 0 || s.Stages[len(s.Stages)-1] != s.Final {
				t.Fatalf("selection %+v", s)
			}
		}
	})
}
