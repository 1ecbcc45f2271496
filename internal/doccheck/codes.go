// Package doccheck holds what the tests that keep the reference docs
// (docs/*.md) equal to the code share: reading the constants (error
// codes, message types) a package declares from its source. Only tests
// import it; it imports nothing of the project, so that the test binaries
// it joins stay small.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// CodeConstants returns the string constants whose names start with Code
// that the non-test files of the package in dir declare, by name. It fails
// the test when there are none.
func CodeConstants(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	return StringConstants(tb, dir, "Code")
}

// StringConstants returns the string constants whose names start with
// prefix that the non-test files of the package in dir declare, by name.
// It fails the test when there are none.
func StringConstants(tb testing.TB, dir, prefix string) map[string]string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		tb.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				addConstants(consts, g, prefix)
			}
		}
	}
	if len(consts) == 0 {
		tb.Fatalf("%s declares no %s constants", dir, prefix)
	}
	return consts
}

func addConstants(consts map[string]string, g *ast.GenDecl, prefix string) {
	for _, spec := range g.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				consts[name.Name], _ = strconv.Unquote(lit.Value)
			}
		}
	}
}
