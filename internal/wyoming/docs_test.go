package wyoming

import (
	"bytes"
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/doccheck"
)

// TestDocsErrorCodes: docs/wyoming.md's table of error codes lists the
// codes this package declares, and no other.
func TestDocsErrorCodes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/wyoming.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := bytes.Cut(doc, []byte("\n### Error codes\n"))
	if !ok {
		t.Fatal("docs/wyoming.md has no Error codes section")
	}
	table, _, _ = bytes.Cut(table, []byte("\n#"))
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllSubmatch(table, -1) {
		listed = append(listed, string(m[1]))
	}
	declared := slices.Collect(maps.Values(doccheck.CodeConstants(t, ".")))
	slices.Sort(listed)
	slices.Sort(declared)
	if !slices.Equal(listed, declared) {
		t.Errorf("docs/wyoming.md lists the codes %v; the package declares %v", listed, declared)
	}
}
