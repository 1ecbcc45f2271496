package doccheck_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/doccheck"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/payload"
)

// TestDocErrorCodes checks the table of error codes of docs/payload.md
// against the code: every Code constant of package payload is in it, every
// code in it is a constant, and its status is the one the answer has. (It
// lives here, not in package payload, so that payload's test binary, whose
// benchmarks measure the codec, links nothing of the HTTP layer.)
func TestDocErrorCodes(t *testing.T) {
	consts := doccheck.CodeConstants(t, "../payload")
	if len(consts) == 0 {
		t.Fatal("found no Code constants in the package")
	}
	table := docErrorCodes(t)
	known := map[string]bool{}
	for name, code := range consts {
		known[code] = true
		if _, ok := table[code]; !ok {
			t.Errorf("%s (%q) is not in the error codes of docs/payload.md", name, code)
		}
	}
	for code, status := range table {
		if !known[code] {
			t.Errorf("docs/payload.md lists the error code %q, which package payload does not have", code)
			continue
		}
		if got, _, _ := httperr.Classify(&payload.Error{Code: code}); got != status {
			t.Errorf("docs/payload.md gives %q the status %d; an answer has %d", code, status, got)
		}
	}
}

// docErrorCodes returns the rows of the table under "## Error codes" in
// docs/payload.md: each code's status.
func docErrorCodes(t *testing.T) map[string]int {
	t.Helper()
	src, err := os.ReadFile("../../docs/payload.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	start := slices.Index(lines, "## Error codes")
	if start < 0 {
		t.Fatal(`docs/payload.md has no "## Error codes" section`)
	}
	table := map[string]int{}
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "## ") {
			break
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if !strings.HasPrefix(l, "| `") || len(cells) != 3 {
			continue
		}
		code := strings.Trim(cells[0], "`")
		status, err := strconv.Atoi(cells[1])
		if err != nil {
			t.Errorf("docs/payload.md: the status of %q is %q, not a number", code, cells[1])
		}
		if _, dup := table[code]; dup {
			t.Errorf("docs/payload.md lists %q twice", code)
		}
		table[code] = status
	}
	if len(table) == 0 {
		t.Fatal("docs/payload.md has no rows in its table of error codes")
	}
	return table
}
