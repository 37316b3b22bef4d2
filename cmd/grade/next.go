package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strings"

	"ratelab/grader"
	"ratelab/reports"
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
	TODO  string // the TODO's comment as todoSentence joins it, without "//"
	// Why is the check's message when it failed on what the learner wrote
	// (not on code left to write): for a unit check with random inputs,
	// the smallest case rapid shrank the failure to, and the command that
	// replays it.
	Why string
}

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
		names := reports.Unwritten(c.Message)
		if names == nil {
			step.Why = c.Message
		}
		if names != nil {
			file := filepath.Join(root, step.File)
			step.Line, step.TODO = todoFor(file, task.Number, names[0])
			if step.Line == 0 {
				// Not Go (task 6's Lua), or no TODO where the function is:
				// the file's first TODO.
				step.Line, step.TODO = firstTODO(file, task.Number)
			}
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
		for i, c := range cg.List {
			line := fset.Position(c.Pos()).Line
			text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if line > from && line <= to && strings.HasPrefix(text, marker) {
				var rest []string
				for _, more := range cg.List[i+1:] {
					rest = append(rest, strings.TrimSpace(strings.TrimPrefix(more.Text, "//")))
				}
				return line, todoSentence(text, rest)
			}
		}
	}
	return 0, ""
}

// firstTODO returns the line of the first edit site in file, a comment
// line (//, -- or #) that opens with "TODO(taskN):", in any language, and
// its text as todoSentence joins it; 0 when there is none.
func firstTODO(file string, task int) (int, string) {
	src, err := os.ReadFile(file)
	if err != nil {
		return 0, ""
	}
	marker := fmt.Sprintf("TODO(task%d)", task)
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		at := strings.Index(l, marker+":")
		if at < 0 {
			continue
		}
		lead := l[:at] // the comment's opening, such as "// " or "-- "
		if opener := strings.TrimSpace(lead); opener != "//" && opener != "--" && opener != "#" {
			continue // the marker named in a sentence, not an edit site
		}
		var rest []string
		for _, next := range lines[i+1:] {
			body, ok := strings.CutPrefix(next, lead)
			if !ok || strings.TrimSpace(body) == "" {
				break
			}
			rest = append(rest, strings.TrimSpace(body))
		}
		return i + 1, todoSentence(strings.TrimSpace(l[at:]), rest)
	}
	return 0, ""
}

// todoSentence is a TODO's first line joined with the comment lines after
// it until a line ends a sentence: "TODO(task3): choose the fields. Two
// numbers describe the bucket's" goes on with "content between calls; add
// the settings and a mutex." It stops before a line that starts another
// TODO or Goal, and after at most three lines in all.
func todoSentence(first string, rest []string) string {
	text := first
	for i, l := range rest {
		if strings.HasSuffix(text, ".") || i == 2 || strings.HasPrefix(l, "TODO") || strings.HasPrefix(l, "Goal") || l == "" {
			break
		}
		text += " " + l
	}
	return text
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

// printNextStep writes the next step, if any, as the grading's last
// lines: the edit site, its TODO, the first failing check, where the hints
// are, what the check found when it is not a stub's panic and, when again is not empty, the command line that shows every
// check (again).
func printNextStep(w io.Writer, root string, doc *results.Document, again string) {
	step, ok := findNextStep(root, doc)
	if !ok {
		return
	}
	if step.Line > 0 {
		fmt.Fprintf(w, "next: %s:%d\n  %s\n", step.File, step.Line, step.TODO)
	} else {
		fmt.Fprintf(w, "next: %s\n", step.File)
	}
	more := ""
	if again != "" {
		more = "; every check: " + again
	}
	fmt.Fprintf(w, "  first failing check: %q; stuck? grade hint %s%s\n", step.Check, step.Task.ID, more)
	if step.Why != "" {
		fmt.Fprintf(w, "  %s\n", step.Why)
	}
}
