// Package release writes a learner template of the ratelab repository: the
// repository as a learner receives it, without the reference solutions or
// anything only they make useful, building the learner's code everywhere,
// and carrying the Classroom workflow and a release manifest of its frozen
// files. `grade export` is its command; docs/CLASSROOM.md tells instructors
// how to publish the result.
//
// What belongs to the reference alone (solutions/, the grader's corpus and
// self-checks, the tree adapters' reference halves) is a rule of the
// repository's layout: layout.ReferenceOnly decides it. This package adds only what the release
// itself leaves out or replaces (the project's CI, local runs, the sources
// of the template's own files, the instructors' page).
package release

import (
	"bytes"
	"errors"
	"fmt"
	"go/build/constraint"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"ratelab/internal/integrity"
	"ratelab/internal/layout"
	"sort"
	"strconv"
	"strings"
)

// Workflow is where a learner template keeps the GitHub Classroom workflow
// that grades it, and WorkflowSource where this repository keeps it.
const (
	Workflow       = ".github/workflows/classroom.yml"
	WorkflowSource = "template/" + Workflow
)

// templateFiles are the template's own files, kept in this repository under
// template/: each replaces (or adds) the file at its path in the template.
var templateFiles = []struct{ from, to string }{
	{WorkflowSource, Workflow},
	{"template/README.md", "README.md"},           // the learners' README
	{"template/.gitattributes", ".gitattributes"}, // LF endings for the frozen files
}

// Stats says what Export wrote.
type Stats struct {
	// Dir is the template's folder, absolute.
	Dir string
	// Source is how the repository's files were listed: "git ls-files",
	// or "a walk of the tree (no git: ...)" where git is missing.
	Source string
	// Files counts the files written, the template's own files and the
	// manifest included.
	Files int
	// Frozen counts the files in the template's manifest.
	Frozen int
	// Untracked lists the files git neither tracks nor ignores that the
	// template would otherwise hold: they were left out.
	Untracked []string
	// Rewired lists the imports of reference packages that Export turned
	// into imports of the learner's packages.
	Rewired []Rewire
}

// Rewire is one import of a reference package, ratelab/solutions/<pkg>, in
// a file under exercises/, that Export replaced with the learner's
// ratelab/exercises/<pkg>.
type Rewire struct {
	File string // the repository path of the file
	From string // the import path replaced
	To   string // the import path in its place
}

// String returns the change as one line: "file: imports To instead of From".
func (r Rewire) String() string {
	return fmt.Sprintf("%s: imports %s instead of %s", r.File, r.To, r.From)
}

// DirError is Export's error for a destination it refuses (a file, a
// folder that is not empty, one it cannot create or read). Nothing was
// written.
type DirError struct {
	Dir string
	Err error
}

// Error returns "dir: what is wrong with it".
func (e *DirError) Error() string { return e.Dir + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *DirError) Unwrap() error { return e.Err }

// skip reports whether the repository path p (slash-separated, relative to
// the root) stays out of a learner template: what layout.ReferenceOnly
// names, and what the release itself leaves out or replaces.
func skip(p string) bool {
	if layout.ReferenceOnly(p) {
		return true
	}
	for _, dir := range []string{
		".git",         // git's own
		"ratelab-runs", // local grade runs
		".ci",          // the project's own CI scripts
		"template",     // the sources of the template's own files
	} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	for _, f := range templateFiles {
		if p == f.to {
			return true // replaced by the template's own
		}
	}
	switch p {
	case ".github/workflows/ci.yml", // the project's own CI; the template gets Workflow
		layout.ManifestPath, // written afresh for the template
		"docs/CLASSROOM.md": // for instructors
		return true
	}
	// This package's tests export this repository: they need solutions/.
	ok, _ := path.Match("internal/release/*_test.go", p)
	return ok
}

// Export writes the learner template of the repository at root into dir,
// which must not exist or be empty (else a *DirError).
//
// The template holds the files git tracks (every file, when git is
// missing) but what belongs to the reference alone (layout.ReferenceOnly),
// the project's own CI (.github/workflows/ci.yml, .ci/), local runs
// (ratelab-runs/), template/ and docs/CLASSROOM.md. In it every
// tree adapter's exercises.go (internal/trees/*) loses its build line, so that with
// the solutions.go twins gone every program builds the learner's code; a Go
// file under exercises/ that imports ratelab/solutions/<pkg> imports
// ratelab/exercises/<pkg> instead (listed in Stats.Rewired). The files
// under template/ take their places (the Classroom workflow becomes
// Workflow), and the release manifest, layout.ManifestPath, is written
// last: the template's grader refuses to score a tree whose frozen files
// changed.
//
// On any error Export removes what it wrote.
func Export(root, dir string) (st *Stats, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	created, err := prepareDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if created {
				os.RemoveAll(dir)
			} else {
				emptyDir(dir)
			}
		}
	}()

	st = &Stats{Dir: dir}
	paths, err := gitFiles(root)
	if err == nil {
		st.Source = "git ls-files"
		st.Untracked = gitUntracked(root)
	} else {
		st.Source = "a walk of the tree (no git: " + firstLine(err.Error()) + ")"
		if paths, err = walkFiles(root, dir); err != nil {
			return nil, err
		}
	}

	copied := map[string]bool{}
	var solutionCmds []string
	for _, p := range paths {
		if tree, ok := layout.AdapterHalf(p); ok && tree == layout.Solutions {
			solutionCmds = append(solutionCmds, p)
		}
		if skip(p) {
			continue
		}
		src := filepath.Join(root, filepath.FromSlash(p))
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, but deleted in the working tree
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue // a submodule or a symbolic link: nothing a template needs
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if tree, ok := layout.AdapterHalf(p); ok && tree == layout.Exercises {
			if b, err = dropExerciseBuildLine(b); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
		}
		if strings.HasPrefix(p, "exercises/") && strings.HasSuffix(p, ".go") {
			var moved []Rewire
			if b, moved, err = exercisesInsteadOfSolutions(root, p, b); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			st.Rewired = append(st.Rewired, moved...)
		}
		if err := writeFile(dir, p, b, fi.Mode().Perm()); err != nil {
			return nil, err
		}
		copied[p] = true
		st.Files++
	}
	// Each adapter's deleted solutions.go must leave its exercises.go twin
	// behind, or the programs would lose the code they need.
	for _, p := range solutionCmds {
		twin := layout.AdapterTwin(p)
		if !copied[twin] {
			return nil, fmt.Errorf("%s has no %s beside it: the template's %s would not build", p, path.Base(twin), path.Dir(p))
		}
	}

	for _, f := range templateFiles {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.from)))
		if err != nil {
			return nil, fmt.Errorf("the template's %s: %w", f.to, err)
		}
		if err := writeFile(dir, f.to, b, 0o644); err != nil {
			return nil, err
		}
		st.Files++
	}

	if bad, err := importsOfSolutions(dir); err != nil {
		return nil, err
	} else if len(bad) > 0 {
		return nil, fmt.Errorf("these files import ratelab/solutions, which a learner template does not have: %s", strings.Join(bad, ", "))
	}

	m, err := integrity.WriteManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("write the manifest: %w", err)
	}
	st.Frozen = len(m.Files)
	st.Files++
	return st, nil
}

// prepareDir makes sure dir exists and is empty. It reports whether it
// created dir.
func prepareDir(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, &DirError{dir, fmt.Errorf("create it: %w", err)}
		}
		return true, nil
	case err != nil:
		return false, &DirError{dir, err}
	case !fi.IsDir():
		return false, &DirError{dir, errors.New("a file; give a new or empty folder")}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, &DirError{dir, err}
	}
	if len(entries) > 0 {
		return false, &DirError{dir, errors.New("not empty; give a new or empty folder")}
	}
	return false, nil
}

// emptyDir removes everything inside dir, leaving dir.
func emptyDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func writeFile(dir, p string, b []byte, perm fs.FileMode) error {
	dst := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, perm)
}

// gitFiles lists the files git tracks under root, as slash paths relative
// to root.
func gitFiles(root string) ([]string, error) {
	out, err := gitOutput(root, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, err
	}
	return splitNUL(out), nil
}

// gitUntracked lists the files git neither tracks nor ignores, but those
// skip leaves out anyway. Without git it lists none.
func gitUntracked(root string) []string {
	out, err := gitOutput(root, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil
	}
	var paths []string
	for _, p := range splitNUL(out) {
		if !skip(p) {
			paths = append(paths, p)
		}
	}
	return paths
}

func gitOutput(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("git %s: %s", args[0], msg)
		}
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return out, nil
}

func splitNUL(b []byte) []string {
	var out []string
	for _, p := range strings.Split(string(b), "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// walkFiles lists every file under root, as git would without its index:
// no .git, no local runs, no built binaries, nothing under exclude (the
// export's own folder, if it is inside root).
func walkFiles(root, exclude string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == exclude {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "ratelab-runs", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		// What .gitignore ignores: the built grade, test binaries, profiles.
		if rel == "grade" || strings.HasSuffix(rel, ".test") || strings.HasSuffix(rel, ".out") {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out, err
}

// dropExerciseBuildLine removes the //go:build ratelab_ex_<pkg> line (and
// the blank lines after it) from a tree adapter's exercises.go, so that it is
// the only code of its command. Any other build line is an error: the
// template could not be made to build by removing it.
func dropExerciseBuildLine(src []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || (strings.HasPrefix(t, "//") && !constraint.IsGoBuild(t)) {
			continue // comments and blank lines may come before the build line
		}
		if !constraint.IsGoBuild(t) {
			break // the package clause: no build line
		}
		expr, err := constraint.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("its build line %q: %w", t, err)
		}
		tag, ok := expr.(*constraint.TagExpr)
		if !ok || !strings.HasPrefix(tag.Tag, "ratelab_ex_") {
			return nil, fmt.Errorf("its build line %q is not one ratelab_ex_ tag", t)
		}
		rest := lines[i+1:]
		for len(rest) > 0 && strings.TrimSpace(rest[0]) == "" {
			rest = rest[1:]
		}
		out := []byte(strings.Join(append(lines[:i:i], rest...), ""))
		if formatted, err := format.Source(out); err == nil {
			out = formatted
		}
		return out, nil
	}
	return nil, errors.New("it has no //go:build ratelab_ex_<pkg> line")
}

// exercisesInsteadOfSolutions makes a Go file of the learner's tree that
// imports a reference package, ratelab/solutions/<pkg>, import the learner's
// ratelab/exercises/<pkg> instead: a template has no reference, so the
// learner's own code stands in, as it does for the commands. It returns the
// file and what it changed; a file that does not parse is returned as is.
func exercisesInsteadOfSolutions(root, name string, src []byte) ([]byte, []Rewire, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
	if err != nil {
		return src, nil, nil
	}
	var out bytes.Buffer
	var moved []Rewire
	last := 0
	for _, imp := range f.Imports {
		ip, _ := strconv.Unquote(imp.Path.Value)
		pkg, ok := strings.CutPrefix(ip, "ratelab/solutions/")
		if !ok {
			continue
		}
		if !isDir(filepath.Join(root, "exercises", filepath.FromSlash(pkg))) {
			return nil, nil, fmt.Errorf("it imports %s, and exercises/%s does not exist to take its place", ip, pkg)
		}
		start, end := fset.Position(imp.Path.Pos()).Offset, fset.Position(imp.Path.End()).Offset
		out.Write(src[last:start])
		to := "ratelab/exercises/" + pkg
		out.WriteString(strconv.Quote(to))
		last = end
		moved = append(moved, Rewire{File: name, From: ip, To: to})
	}
	if moved == nil {
		return src, nil, nil
	}
	out.Write(src[last:])
	b := out.Bytes()
	if formatted, err := format.Source(b); err == nil {
		b = formatted // the imports in order again
	}
	return b, moved, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// importsOfSolutions returns the Go files under dir that import a package
// of ratelab/solutions.
func importsOfSolutions(dir string) ([]string, error) {
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not Go the compiler would read either; go build says so
		}
		for _, imp := range f.Imports {
			if ip, _ := strconv.Unquote(imp.Path.Value); ip == "ratelab/solutions" || strings.HasPrefix(ip, "ratelab/solutions/") {
				rel, _ := filepath.Rel(dir, p)
				bad = append(bad, filepath.ToSlash(rel)+" ("+ip+")")
			}
		}
		return nil
	})
	return bad, err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
