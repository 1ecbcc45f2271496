package api

// Checks of docs/api.md against the code: its table of error codes, and
// its endpoints.

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/omnistage/omnistage/internal/doccheck"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// docRow is one row of docs/api.md's table of error codes.
type docRow struct {
	status int
	typ    string
	line   int
}

// readCodeTable reads the table of the "Error codes" section of
// docs/api.md: code → status and type.
func readCodeTable(t *testing.T) map[string]docRow {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]docRow{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.TrimLeft(line, "# ") == "Error codes"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("docs/api.md:%d: a row of the error codes without code, status and type: %q", n, line)
		}
		code := strings.Trim(strings.TrimSpace(cells[1]), "`")
		status, err := strconv.Atoi(strings.TrimSpace(cells[2]))
		if err != nil {
			t.Errorf("docs/api.md:%d: status %q of %s is not a number", n, cells[2], code)
		}
		if _, dup := rows[code]; dup {
			t.Errorf("docs/api.md:%d: %s is in the table twice", n, code)
		}
		rows[code] = docRow{status: status, typ: strings.Trim(strings.TrimSpace(cells[3]), "`"), line: n}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("docs/api.md has no table under a heading Error codes")
	}
	return rows
}

// httpStatuses maps the names of net/http's status constants to their
// values. Each is named after its status text ("Not Found":
// StatusNotFound); the few that are not are never an error answer here.
func httpStatuses() map[string]int {
	m := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m["Status"+strings.Map(func(r rune) rune {
				if unicode.IsLetter(r) || unicode.IsDigit(r) {
					return r
				}
				return -1
			}, text)] = code
		}
	}
	return m
}

// codeUse is an error answer the code writes with a constant status and
// code: a call of httperr.Errorf or httperr.Write.
type codeUse struct {
	code   string
	status int
	at     string
}

// scanCodeUses finds, in the non-test Go files of the module's internal
// and cmd trees, every httperr.Errorf(status, code, ...) and
// httperr.Write(w, status, type, code, msg) whose status and code are
// constants. consts resolves "pkg.Name" of a code constant.
func scanCodeUses(t *testing.T, consts map[string]string) []codeUse {
	t.Helper()
	statuses := httpStatuses()
	code := func(pkg string, e ast.Expr) (string, bool) {
		if c, ok := e.(*ast.CallExpr); ok && len(c.Args) == 1 { // string(orchestrator.CodeX)
			e = c.Args[0]
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil && e.Kind == token.STRING
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				s, ok := consts[x.Name+"."+e.Sel.Name]
				return s, ok
			}
		case *ast.Ident:
			s, ok := consts[pkg+"."+e.Name]
			return s, ok
		}
		return "", false
	}
	status := func(e ast.Expr) (int, bool) {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" {
				n, ok := statuses[sel.Sel.Name]
				if !ok {
					t.Errorf("http.%s: no status text names it; extend httpStatuses", sel.Sel.Name)
				}
				return n, ok
			}
		}
		return 0, false // a variable: not a constant use
	}
	var uses []codeUse
	fset := token.NewFileSet()
	for _, tree := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			pkg := f.Name.Name
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var fn string
				switch f := call.Fun.(type) {
				case *ast.SelectorExpr:
					if x, ok := f.X.(*ast.Ident); ok && x.Name == "httperr" {
						fn = f.Sel.Name
					}
				case *ast.Ident:
					if pkg == "httperr" {
						fn = f.Name
					}
				}
				si, ci := -1, -1
				switch fn {
				case "Errorf":
					si, ci = 0, 1
				case "Write":
					si, ci = 1, 3
				}
				if si < 0 || len(call.Args) <= ci {
					return true
				}
				s, okS := status(call.Args[si])
				c, okC := code(pkg, call.Args[ci])
				if okS && okC {
					uses = append(uses, codeUse{code: c, status: s, at: fset.Position(call.Pos()).String()})
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return uses
}

// TestErrorCodeTable checks docs/api.md's table of error codes against the
// code: every code the server can answer with (the Code constants of
// httperr, orchestrator and payload) is in the table, with the status and
// type that httperr gives it: httperr.Status for the orchestrator's,
// httperr.Classify for a payload error and for every constant status the
// code writes a code with; and every code in the table exists.
func TestErrorCodeTable(t *testing.T) {
	table := readCodeTable(t)
	own := doccheck.CodeConstants(t, filepath.Join(repoRoot, "internal/httperr"))
	orch := doccheck.CodeConstants(t, filepath.Join(repoRoot, "internal/orchestrator"))
	pay := doccheck.CodeConstants(t, filepath.Join(repoRoot, "internal/payload"))
	consts := map[string]string{}
	known := map[string]bool{}
	for pkg, cs := range map[string]map[string]string{"httperr": own, "orchestrator": orch, "payload": pay} {
		for name, v := range cs {
			consts[pkg+"."+name] = v
			known[v] = true
		}
	}
	check := func(code string, status int, typ, why string) {
		t.Helper()
		row, ok := table[code]
		switch {
		case !ok:
			t.Errorf("%s (%d %s, %s) is not in docs/api.md's table of error codes", code, status, typ, why)
		case row.status != status || row.typ != typ:
			t.Errorf("docs/api.md:%d: %s is %d %s, but %s gives %d %s", row.line, code, row.status, row.typ, why, status, typ)
		}
	}
	for _, v := range orch {
		status, typ := httperr.Status(orchestrator.Code(v))
		check(v, status, typ, "httperr.Status")
	}
	for _, v := range pay {
		status, typ, _ := httperr.Classify(&payload.Error{Code: v})
		check(v, status, typ, "httperr.Classify of a *payload.Error")
	}
	// Each of httperr's codes gets its status where an answer is made.
	seen := map[string]bool{}
	status, typ, code := httperr.Classify(&http.MaxBytesError{Limit: 1})
	check(code, status, typ, "httperr.Classify of an *http.MaxBytesError")
	seen[code] = true
	for _, u := range scanCodeUses(t, consts) {
		status, typ, _ := httperr.Classify(httperr.Errorf(u.status, u.code, ""))
		check(u.code, status, typ, u.at)
		seen[u.code] = true
	}
	for name, v := range own {
		if !seen[v] {
			t.Errorf("httperr.%s (%s): no answer in the code writes it with a constant status, so its row cannot be checked", name, v)
		}
	}
	for code, row := range table {
		if !known[code] {
			t.Errorf("docs/api.md:%d: %s is a code no package defines", row.line, code)
		}
	}
}

// TestDocumentedEndpoints checks that docs/api.md documents every endpoint
// a full server lists in its 404 unknown_route answer.
func TestDocumentedEndpoints(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, setup{yaml: speechYAML})
	for _, ep := range strings.Split(f.srv.endpointList, ", ") {
		if !strings.Contains(string(doc), "`"+ep+"`") {
			t.Errorf("docs/api.md does not document `%s`", ep)
		}
	}
}
