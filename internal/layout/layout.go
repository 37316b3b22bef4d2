// Package layout says where things are in a ratelab repository, once: which
// files are the learner's to edit, which are frozen (hashed into every
// results document, and refused when a release manifest says otherwise),
// which belong to the reference alone (left out of a learner template),
// where the trees, their adapters, the grader's corpus and the release
// manifest live, and which build tag picks a tree's code.
//
// A tree is exercises/ (the learner's) or solutions/ (the reference); a
// tree package is one folder of a tree, such as exercises/bucket. Programs
// that run graded code reach a tree package only through its adapter,
// internal/trees/<pkg>, whose two files pick the tree: exercises.go under
// the build tag [Tag](pkg), solutions.go without it.
//
// Paths are slash-separated and relative to the repository's root.
package layout

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The trees, and where the rest of the repository keeps what the rules
// below talk about.
const (
	// Exercises holds the learner's packages, one per task with code.
	Exercises = "exercises"
	// Solutions holds the reference packages, mirroring Exercises.
	Solutions = "solutions"
	// Adapters holds one adapter package per tree package (see the
	// package comment).
	Adapters = "internal/trees"
	// Tasks holds the grader's task packages, each with its corpus of
	// known-wrong, broken and right code under testdata/.
	Tasks = "grader/tasks"
	// ManifestPath is the release manifest: the SHA-256 of every frozen
	// file, written by `grade manifest --write` and `grade export`. A
	// development checkout has none.
	ManifestPath = "grader/manifest.json"
	// Runs is where `grade` writes its results by default, inside the
	// checkout; never frozen, never exported.
	Runs = "ratelab-runs"
)

// tagPrefix begins every tree-picking build tag.
const tagPrefix = "ratelab_ex_"

// Tag returns the build tag that makes programs take tree package pkg
// (such as "bucket") from Exercises rather than Solutions.
func Tag(pkg string) string { return tagPrefix + pkg }

// TagPackage returns the tree package a build tag picks, and whether tag
// is one of Tag's.
func TagPackage(tag string) (string, bool) {
	pkg, ok := strings.CutPrefix(tag, tagPrefix)
	return pkg, ok && pkg != ""
}

// Packages returns the tree packages of the repository at root: the folders
// of Exercises, in name order. The learner's tree is the one every
// repository has (a learner template has no Solutions).
func Packages(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, Exercises))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// HasSolutions reports whether the repository at root holds the reference
// tree. A learner template has none: there, --solutions has nothing to
// grade or serve.
func HasSolutions(root string) bool { return isDir(filepath.Join(root, Solutions)) }

// HasReference reports whether the repository at root holds the reference
// of tree package pkg.
func HasReference(root, pkg string) bool { return isDir(filepath.Join(root, Solutions, pkg)) }

// Within reports whether p is dir or lies under it.
func Within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// code reports whether p is a file of code the grader builds: Go or Lua.
func code(p string) bool { return strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".lua") }

// test reports whether p is a Go test file.
func test(p string) bool { return strings.HasSuffix(p, "_test.go") }

// hidden reports whether some element of p begins with a dot.
func hidden(p string) bool {
	return slices.ContainsFunc(strings.Split(p, "/"), func(e string) bool { return strings.HasPrefix(e, ".") })
}

// Learner reports whether p is a file the learner edits: code in the
// learner's tree that is not a test. Everything else a learner is given is
// theirs to read.
func Learner(p string) bool {
	return Within(p, Exercises) && code(p) && !test(p)
}

// ReferenceOnly reports whether p is only of use beside the reference, so
// that a learner template leaves it out: the reference tree, the tree
// adapters' reference halves (internal/trees/*/solutions.go, which a build
// without a tree's tag compiles), the grader's corpus (every file under a
// task package's testdata/, whatever its extension) and the grader's
// self-checks (its _test.go files), which run the corpus and the reference.
func ReferenceOnly(p string) bool {
	switch {
	case Within(p, Solutions):
		return true
	case Within(p, Adapters) && path.Base(p) == "solutions.go":
		return true
	case Within(p, "grader") && (test(p) || slices.Contains(strings.Split(p, "/"), "testdata")):
		return true
	}
	return false
}

// Frozen reports whether p is a file a learner must not change: every file
// of code in the repository that is neither the learner's nor the
// reference's alone (the exercises' test adapters, the suites, the grader,
// the harness, the servers, the reports, the commands), outside hidden
// folders and local runs.
func Frozen(p string) bool {
	return code(p) && !Learner(p) && !ReferenceOnly(p) && !hidden(p) && !Within(p, Runs)
}

// Skipped reports whether a walk of the repository passes over folder p
// altogether: hidden folders, local runs, and npm's.
func Skipped(p string) bool {
	return p != "." && (hidden(p) || Within(p, Runs) || path.Base(p) == "node_modules")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// AdapterHalf reports whether p is one half of a tree adapter
// (internal/trees/<pkg>/exercises.go or solutions.go), and which tree it
// takes: Exercises or Solutions.
func AdapterHalf(p string) (tree string, ok bool) {
	dir, file := path.Split(p)
	if path.Dir(strings.TrimSuffix(dir, "/")) != Adapters {
		return "", false
	}
	switch file {
	case Exercises + ".go":
		return Exercises, true
	case Solutions + ".go":
		return Solutions, true
	}
	return "", false
}

// AdapterTwin returns the other half of the tree adapter half p.
func AdapterTwin(p string) string {
	dir, file := path.Split(p)
	if file == Exercises+".go" {
		return dir + Solutions + ".go"
	}
	return dir + Exercises + ".go"
}
