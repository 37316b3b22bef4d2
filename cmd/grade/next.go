package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"ratelab/grader"
	"ratelab/results"
)

// nextStep is the one thing a learner whose grading failed should do next:
// the first failing check in the task's own order, the file it is about
// and, where the check says what is not written yet, the line of the TODO
// to start from.
type nextStep struct {
	Task  grader.Task
	Check string // the first failing check's name
	File  string // such as exercises/bucket/bucket.go
	Line  int    // the TODO's line, or 0 when none can be named
	TODO  string // the TODO's first line, without "// "
}

// notWritten finds what a stub's panic says is missing ("task 3:
// TokenBucket.TryTake is not implemented yet").
var notWritten = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?) is not implemented yet`)

// findNextStep returns the next step for doc, graded from the learner's
// tree under root, or false when nothing failed or the tree graded was not
// the learner's.
func findNextStep(root string, doc *results.Document) (nextStep, bool) {
	if doc.Impl != string(grader.Exercises) {
		return nextStep{}, false
	}
	for _, c := range doc.Checks {
		if c.Status != results.StatusFail {
			continue
		}
		task, ok := grader.Lookup(c.Task)
		if !ok || task.Unit == nil {
			continue
		}
		step := nextStep{Task: task, Check: c.Name, File: filepath.ToSlash(filepath.Join(string(grader.Exercises), task.Unit.Package, task.Unit.File))}
		if m := notWritten.FindStringSubmatch(c.Message); m != nil {
			step.Line, step.TODO = todoFor(filepath.Join(root, step.File), task.Number, m[1])
		}
		return step, true
	}
	return nextStep{}, false
}

// todoFor returns the first TODO(taskN) of the function what ("F" or
// "Type.Method") in file, counting the declarations before it that no
// other function claims (the type whose fields it fills in): the first
// TODO after the end of the function declared before it. It returns 0 when
// the file does not parse or has no such TODO.
func todoFor(file string, task int, what string) (int, string) {
	src, err := os.ReadFile(file)
	if err != nil {
		return 0, ""
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return 0, ""
	}
	recv, name, dotted := strings.Cut(what, ".")
	if !dotted {
		recv, name = "", what
	}
	from, to := 0, 0
	prevEnd := 0
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if fd.Name.Name == name && receiverName(fd) == recv {
			from, to = prevEnd, fset.Position(fd.End()).Line
			break
		}
		prevEnd = fset.Position(fd.End()).Line
	}
	if to == 0 {
		return 0, ""
	}
	marker := fmt.Sprintf("TODO(task%d)", task)
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			line := fset.Position(c.Pos()).Line
			text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if line > from && line <= to && strings.HasPrefix(text, marker) {
				return line, text
			}
		}
	}
	return 0, ""
}

// receiverName returns the type name of fd's receiver, or "".
func receiverName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// printNextStep writes the next step, if any, as the grading's last line.
func printNextStep(w io.Writer, root string, doc *results.Document) {
	step, ok := findNextStep(root, doc)
	if !ok {
		return
	}
	where := step.File
	if step.Line > 0 {
		where = fmt.Sprintf("%s:%d, %s", step.File, step.Line, step.TODO)
	}
	fmt.Fprintf(w, "next: %s (first failing check: %q); stuck? grade hint %s\n", where, step.Check, step.Task.ID)
}
