package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoPipelines = `pipeline:
  name: first
  input: text
  stages:
    - {id: 0, name: talker, engine: test-talker, input: text, output: frames}
    - {id: 1, name: vocoder, engine: test-vocoder, input: frames, output: audio, final_output: true}
---
pipeline:
  name: second
  input: text
  stages:
    - {id: 0, name: talker, engine: test-talker, input: text, output: frames}
    - {id: 1, name: vocoder, engine: test-vocoder, input: frames, output: audio, final_output: true}
  aligner: {engine: sphinx-aligner}
deploy:
  max_inflight: 3
`

// TestParseAll checks a file of one pipeline per YAML document: each is a
// whole configuration of its own, errors carry the file's own lines, and
// two pipelines of one name are refused, in one file or across refs.
func TestParseAll(t *testing.T) {
	cs, err := ParseAll([]byte(twoPipelines), "two.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Pipeline.Name != "first" || cs[1].Pipeline.Name != "second" {
		t.Fatalf("parsed %d pipelines", len(cs))
	}
	if cs[0].Deploy.MaxInflight != DefaultMaxInflight || cs[1].Deploy.MaxInflight != 3 || cs[0].Pipeline.Aligner != nil || cs[1].Route.String() != "0 -> 1 -> 2" {
		t.Errorf("the documents' sections mixed: %+v, %+v", cs[0].Deploy, cs[1].Deploy)
	}
	if _, err := Parse([]byte(twoPipelines), "two.yaml"); err == nil || !strings.Contains(err.Error(), "two.yaml: holds 2 pipelines, one per YAML document; this command takes one") {
		t.Errorf("Parse of two pipelines: %v", err)
	}
	bad := strings.Replace(twoPipelines, "name: second", "name: first", 1)
	bad = strings.Replace(bad, "output: audio, final_output: true}\n  aligner", "output: audio}\n  aligner", 1)
	_, err = ParseAll([]byte(bad), "bad.yaml")
	for _, want := range []string{
		"bad.yaml: pipeline.name: pipeline first is declared twice",
		"bad.yaml:13: pipeline.stages[1].final_output: stage 1 (vocoder) ends the route",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v; want one with %q", err, want)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(twoPipelines, "name: first", "name: tts", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadAll([]string{"builtin:tts", file})
	if err == nil || !strings.Contains(err.Error(), "pipeline tts is declared in both builtin:tts and "+file) {
		t.Errorf("a name given twice across refs: %v", err)
	}
	all, err := LoadAll([]string{"builtin:tts-24k", file})
	if err != nil || len(all) != 3 {
		t.Fatalf("LoadAll: %d, %v", len(all), err)
	}
	c, err := LoadPipeline(file, "second")
	if err != nil || c.Pipeline.Name != "second" {
		t.Errorf("LoadPipeline: %v", err)
	}
	if _, err := LoadPipeline(file, "third"); err == nil || !strings.Contains(err.Error(), "holds no pipeline third (it holds tts, second)") {
		t.Errorf("LoadPipeline of a missing name: %v", err)
	}
}
func TestDefaultModel(t *testing.T) {
	for _, tc := range []struct {
		names     []string
		want, got string
		errPrefix string
	}{
		{names: []string{"a", "tts"}, got: "tts"},
		{names: []string{"b", "a"}, got: "b"},
		{names: []string{"b", "a"}, want: "a", got: "a"},
		{names: []string{"b", "a"}, want: "c", errPrefix: "the default model c is not a pipeline served here (b, a)"},
		{errPrefix: "no pipeline is served"},
	} {
		got, err := DefaultModel(tc.names, tc.want)
		if got != tc.got || (err == nil) != (tc.errPrefix == "") || (err != nil && !strings.HasPrefix(err.Error(), tc.errPrefix)) {
			t.Errorf("DefaultModel(%v, %q) = %q, %v; want %q, %q", tc.names, tc.want, got, err, tc.got, tc.errPrefix)
		}
	}
}
