package pipeline

// Configuration errors: one per problem, each with its file, line and field
// path, all collected.

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a configuration, located by file, line and
// field path.
type FieldError struct {
	File string
	Line int // 0 when unknown
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// errList collects errors while decoding and validating one file.
type errList struct {
	file string
	errs Errors
}

func (l *errList) add(line int, path, format string, args ...any) {
	l.errs = append(l.errs, &FieldError{File: l.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs
}
