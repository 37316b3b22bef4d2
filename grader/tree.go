package grader

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Where a repository keeps what only its developers have, relative to the
// root (slash-separated).
const (
	// solutionsDir holds the reference solutions, one package per task.
	solutionsDir = "solutions"
	// corpusDir holds the grader's corpus of known-wrong and broken code
	// (wrong/, broken/), whatever form its files take.
	corpusDir = "grader/testdata"
)

// HasSolutions reports whether the tree at root holds the reference
// solutions, solutions/. A learner template written by `grade export` has
// none: there, --solutions has nothing to grade or serve.
func HasSolutions(root string) bool {
	return isDir(filepath.Join(root, solutionsDir))
}

// ReferenceOnly reports whether the repository path p (slash-separated,
// relative to the root) is only of use beside the reference solutions, so
// that a learner template leaves it out: the reference itself
// (solutions/), the grader's corpus of wrong and broken code
// (grader/testdata/, every file in it whatever its extension), the
// grader's self-checks (grader/*_test.go), which run the corpus and the
// reference, and the commands' reference twins (cmd/*/*_solutions.go),
// which a build without a task's ratelab_ex_ tag compiles.
func ReferenceOnly(p string) bool {
	if within(p, solutionsDir) || within(p, corpusDir) {
		return true
	}
	for _, pattern := range []string{"grader/*_test.go", "cmd/*/*_solutions.go"} {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// within reports whether the slash path p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
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
		if slices.Contains(out, t) || isDir(filepath.Join(root, solutionsDir, pkg)) || !isDir(filepath.Join(root, "exercises", pkg)) {
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
