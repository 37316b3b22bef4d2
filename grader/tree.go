package grader

import (
	"slices"

	"ratelab/internal/layout"
)

// HasSolutions reports whether the tree at root holds the reference
// solutions (layout.HasSolutions).
func HasSolutions(root string) bool { return layout.HasSolutions(root) }

// referenceTags returns the build tags for a child program (cmd/fakegpu,
// cmd/storm, cmd/breaker, ...) that takes the graded code as tags say and
// "the reference" for every other task.
//
// A program built without a tree package's tag compiles its code from
// solutions/<pkg> (internal/layout). Where solutions/<pkg> is missing (a
// learner template, or a checkout whose solutions/ was removed) there is no
// reference to take, so the learner's code in exercises/<pkg> stands in:
// the package's tag is added. In a template written by `grade export` the
// adapters' exercises.go carry no build line and their solutions.go are
// gone, so the tags change nothing there; they matter in a tree that lost
// solutions/ but kept its build lines.
func referenceTags(root string, tags []string) []string {
	pkgs, _ := layout.Packages(root)
	out := tags
	for _, pkg := range pkgs {
		t := layout.Tag(pkg)
		if slices.Contains(out, t) || layout.HasReference(root, pkg) {
			continue
		}
		if len(out) == len(tags) {
			out = slices.Clone(tags) // never append into the caller's slice
		}
		out = append(out, t)
	}
	return out
}

// exerciseTags returns the build tags that take every tree package's code
// from exercises/.
func exerciseTags(root string) []string {
	pkgs, _ := layout.Packages(root)
	var out []string
	for _, pkg := range pkgs {
		out = append(out, layout.Tag(pkg))
	}
	return out
}
