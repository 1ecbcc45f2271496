package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// fakeCheck stands in for the engines' own params checks, as the
// orchestrator makes them: the talker takes a voice (slt or rms) and a
// speed, every other stage (the aligner included) takes no params.
func fakeCheck(c *Config) ParamsCheck {
	return func(id int, p json.RawMessage) error {
		name, _ := c.StageSpec(id, 0)
		var err error
		if name == "test-talker" {
			var tp struct {
				Voice string   `json:"voice"`
				Speed *float64 `json:"speed"`
			}
			err = engine.DecodeParams(p, &tp)
			if err == nil && tp.Voice != "" && tp.Voice != "slt" && tp.Voice != "rms" {
				err = &engine.ParamError{Field: "voice", Reason: fmt.Sprintf("unknown voice %q", tp.Voice)}
			}
		} else {
			var none struct{}
			err = engine.DecodeParams(p, &none)
		}
		if err != nil {
			return fmt.Errorf("sampling_params[%d]: stage %d (%s): %w", id, id, c.StageName(id), err)
		}
		return nil
	}
}

// TestRequests checks requests against a route, as every path that takes
// one does (Select, then Selection.CheckParams): testdata/requests holds a
// request body per file, its configuration and the expected selection
// (*.good.yaml) or error (*.bad.yaml) in "# key: value" lines.
func TestRequests(t *testing.T) {
	eachTestdata(t, "testdata/requests/*.yaml", func(t *testing.T, f string, data []byte) {
		want := expectations(t, data)
		c := mustParse(t, want["config"][0])
		var body []byte
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			if !bytes.HasPrefix(line, []byte("#")) {
				body = append(body, line...)
			}
		}
		var req struct {
			OutputModalities []string          `json:"output_modalities"`
			SamplingParams   []json.RawMessage `json:"sampling_params"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("request: %v", err)
		}
		sel, err := c.Route.Select(req.OutputModalities)
		if err == nil {
			err = sel.CheckParams(req.SamplingParams, fakeCheck(c))
		}
		if strings.HasSuffix(f, ".good.yaml") {
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sel.Final); got != want["final"][0] {
				t.Errorf("final stage %s, want %s", got, want["final"][0])
			}
			if got := idList(sel.Stages); got != want["stages"][0] {
				t.Errorf("stages %s, want %s", got, want["stages"][0])
			}
			return
		}
		var se *SelectError
		var pe *engine.ParamError
		if err == nil || !strings.Contains(err.Error(), want["error"][0]) {
			t.Fatalf("error %v, want one containing %q", err, want["error"][0])
		}
		if !errors.As(err, &se) && !errors.As(err, &pe) {
			t.Errorf("error %T is neither a *SelectError nor a *engine.ParamError: it would not be a 400", err)
		}
	})
}

// TestModalitiesLongList checks that a list of any length is refused at
// its first repeat, on every path: the route's selection and the payload
// envelope's validation share CheckModalities.
func TestModalitiesLongList(t *testing.T) {
	c := mustParse(t, "skip.good.yaml")
	mods := slices.Repeat([]string{"audio"}, 100_000)
	_, err := c.Route.Select(mods)
	if err == nil || !strings.Contains(err.Error(), `output_modalities[1]: "audio" is already output_modalities[0]`) {
		t.Errorf("Select of 100000 audio: %v", err)
	}
	var all []string
	for _, k := range Selectable {
		all = append(all, string(k))
	}
	if err := CheckModalities(all); err != nil {
		t.Errorf("every selectable kind once: %v", err)
	}
}
