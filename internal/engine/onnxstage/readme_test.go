package onnxstage_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine/onnxstage"
)

// TestReadmeOptions holds the README's section on the stage to the
// code: its table lists exactly the options the stage decodes.
func TestReadmeOptions(t *testing.T) {
	data, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n## Serving an ONNX model\n"
	text := string(data)
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("the README has no section %q", strings.TrimSpace(heading))
	}
	text = text[i+len(heading):]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(text, -1) {
		documented = append(documented, m[1])
	}
	decoded := jsonNames(reflect.TypeOf(onnxstage.Options{}))
	slices.Sort(documented)
	slices.Sort(decoded)
	if !slices.Equal(documented, decoded) {
		t.Errorf("the README's table lists %v; the stage takes %v", documented, decoded)
	}
}

// jsonNames returns the JSON names of a struct's fields, those of its
// embedded structs included.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			names = append(names, jsonNames(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
