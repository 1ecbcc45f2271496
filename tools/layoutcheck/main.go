// Command layoutcheck holds a Go tree to the layout rules of the
// repository (`make lint` runs it on the tree): no non-test file longer
// than 550 lines, no function longer than 100, and every non-test file
// naming its one concern in its first comment: the package documentation,
// or a comment right after the package clause. Besides, a file that
// starts with "#!" (a script the Makefile or a user runs by its path) is
// executable: a script that lost its mode fails only when someone runs it.
//
// Usage: layoutcheck DIR
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The limits.
const (
	maxFileLines = 550
	maxFuncLines = 100
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: layoutcheck DIR")
		os.Exit(2)
	}
	problems, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "layoutcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// check returns a line per file or function of root that breaks a rule.
func check(root string) ([]string, error) {
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			p, err := checkScript(path, d)
			if p != "" {
				problems = append(problems, p)
			}
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		ps, err := checkFile(path)
		problems = append(problems, ps...)
		return err
	})
	return problems, err
}

func checkFile(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var problems []string
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
		problems = append(problems, fmt.Sprintf("%s: %d lines; keep a file under %d", path, n, maxFileLines))
	}
	if !namesConcern(fset, f) {
		problems = append(problems, fmt.Sprintf("%s: no first comment naming the file's concern (the package doc, or a comment right after the package clause)", path))
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
			problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines; keep a function under %d", path, fset.Position(fd.Pos()).Line, fd.Name.Name, n, maxFuncLines))
		}
	}
	return problems, nil
}

// checkScript returns a problem when the file at path starts with "#!"
// but is not executable, "" otherwise.
func checkScript(path string, d fs.DirEntry) (string, error) {
	info, err := d.Info()
	if err != nil || !info.Mode().IsRegular() || info.Mode()&0o111 != 0 {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 2)
	if n, _ := f.Read(head); n < 2 || string(head) != "#!" {
		return "", nil
	}
	return fmt.Sprintf("%s: starts with #! but is not executable (git update-index --chmod=+x %s)", path, path), nil
}

// namesConcern reports whether f's first comment is its package
// documentation or follows the package clause, before any declaration.
func namesConcern(fset *token.FileSet, f *ast.File) bool {
	if f.Doc != nil {
		return true
	}
	pkg := fset.Position(f.Package).Line
	for _, cg := range f.Comments {
		if fset.Position(cg.Pos()).Line <= pkg {
			continue // a build constraint
		}
		return len(f.Decls) == 0 || cg.Pos() < f.Decls[0].Pos()
	}
	return false
}
