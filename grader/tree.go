package grader

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// HasSolutions reports whether the tree at root holds the reference
// solutions, solutions/. A learner template written by `grade export` has
// none: there, --solutions has nothing to grade or serve.
func HasSolutions(root string) bool {
	return isDir(filepath.Join(root, "solutions"))
}

// referenceTags returns the build tags for a child program (cmd/fakegpu,
// cmd/storm, cmd/breaker, ...) that takes the graded code as tags say and
// "the reference" for every other task.
//
// A program built without a task's ratelab_ex_<pkg> tag compiles that
// task's code from solutions/<pkg>. Where solutions/<pkg> is missing (a
// learner template, or a checkout whose solutions/ was removed) there is no
// reference to take, so the learner's code in exercises/<pkg> stands in:
// the task's exercise tag is added. In a template written by `grade
// export` the cmd/*/*_exercises.go files carry no build line and the
// *_solutions.go files are gone, so the tags change nothing there; they
// matter in a tree that lost solutions/ but kept its build lines.
func referenceTags(root string, tags []string) []string {
	out := tags
	for _, t := range exerciseTags {
		pkg := strings.TrimPrefix(t, "ratelab_ex_")
		if slices.Contains(out, t) || isDir(filepath.Join(root, "solutions", pkg)) || !isDir(filepath.Join(root, "exercises", pkg)) {
			continue // the reference is there, or neither tree has the task
		}
		if len(out) == len(tags) {
			out = slices.Clone(tags) // never append into the caller's slice
		}
		out = append(out, t)
	}
	return out
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
