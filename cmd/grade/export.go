package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
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
	"sort"
	"strconv"
	"strings"

	"ratelab/grader"
)

// The learner template's own files, kept in this repository under template/.
const (
	templateWorkflow = "template/.github/workflows/classroom.yml"
	templateReadme   = "template/README.md"
	templateAttrs    = "template/.gitattributes"
	exportWorkflow   = ".github/workflows/classroom.yml"
)

func init() {
	commands = append(commands, &command{
		Name:      "export",
		UsageLine: "export DIR",
		Short:     "write a learner template repository (for instructors)",
		Long: `Export writes a learner template of this repository into DIR, which must
not exist or be empty: the repository's tracked files (git ls-files; every
file when git is missing) without the reference solutions/, the grader's
corpus of wrong code (grader/testdata/), the grader's self-checks
(grader/*_test.go), the project's own CI (.github/workflows/ci.yml, .ci/),
local runs (ratelab-runs/) and the instructors' pages.

In the copy every cmd/*/*_solutions.go is deleted and the build line of its
*_exercises.go removed, and a file under exercises/ that imports
ratelab/solutions/<pkg> imports ratelab/exercises/<pkg> instead (each such
change is printed): the template builds with the learner's code and never
refers to solutions/. The learners' workflow
(template/.github/workflows/classroom.yml) becomes
.github/workflows/classroom.yml, template/README.md becomes README.md,
template/.gitattributes (LF endings for the frozen files) becomes
.gitattributes, and the release manifest grader/manifest.json is written
last: the template's grader refuses to score a tree whose frozen files
changed.

Files git does not track are left out, and counted on stderr. See
docs/CLASSROOM.md.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(_ context.Context, args []string) error {
				if len(args) != 1 {
					return usagef("want one folder to write the template into, such as 'grade export ../ratelab-template'")
				}
				root, err := grader.FindRoot(".")
				if err != nil {
					return usageError{err.Error()}
				}
				st, err := exportTemplate(root, args[0])
				if err != nil {
					return err
				}
				for _, r := range st.rewired {
					fmt.Fprintf(stdout, "%s\n", r)
				}
				if st.untracked > 0 {
					fmt.Fprintf(stderr, "grade export: left out %d file(s) git does not track, such as %s; 'git add' them to export them\n",
						st.untracked, strings.Join(st.untrackedSome, ", "))
				}
				fmt.Fprintf(stdout, "wrote a learner template to %s: %d files from %s, %d frozen in %s\n",
					st.dir, st.files, st.source, st.frozen, grader.ManifestPath)
				fmt.Fprintf(stdout, "next: cd %s && git init && git add -A && git commit -m 'ratelab template'; see docs/CLASSROOM.md\n", strconv.Quote(st.dir))
				return nil
			}
		},
	})
}

// exportStats says what exportTemplate wrote.
type exportStats struct {
	dir           string // absolute
	source        string // "git ls-files" or "a walk of the tree"
	files         int    // files written, README and workflow included
	frozen        int    // files in the manifest
	untracked     int    // files git does not track, left out
	untrackedSome []string
	rewired       []string // "file: imports X instead of Y", in exercises/
}

// exportSkip reports whether a repository path stays out of the template.
func exportSkip(p string) bool {
	for _, prefix := range []string{"solutions/", "grader/testdata/", "ratelab-runs/", ".ci/", "template/", ".git/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	switch p {
	case ".github/workflows/ci.yml", // the project's own CI; the template gets classroom.yml
		"README.md",                // replaced by template/README.md
		".gitattributes",           // replaced by template/.gitattributes
		grader.ManifestPath,        // written afresh for the template
		"docs/CLASSROOM.md",        // for instructors
		"cmd/grade/export_test.go": // exports this repository: needs solutions/
		return true
	}
	for _, pattern := range []string{
		"grader/*_test.go",     // the self-checks: they need solutions/ and the corpus
		"cmd/*/*_solutions.go", // the exercises' twin becomes the only code
	} {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// exportTemplate writes the learner template of the repository at root into
// dir. Bad input (dir not empty) is a usageError. On any error it removes
// what it wrote.
func exportTemplate(root, dir string) (st *exportStats, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	created, err := prepareExportDir(dir)
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

	st = &exportStats{dir: dir}
	paths, err := gitFiles(root)
	if err == nil {
		st.source = "git ls-files"
		st.untracked, st.untrackedSome = gitUntracked(root)
	} else {
		st.source = "a walk of the tree (no git: " + firstLine(err.Error()) + ")"
		if paths, err = walkFiles(root, dir); err != nil {
			return nil, err
		}
	}

	copied := map[string]bool{}
	var solutionCmds []string
	for _, p := range paths {
		if ok, _ := path.Match("cmd/*/*_solutions.go", p); ok {
			solutionCmds = append(solutionCmds, p)
		}
		if exportSkip(p) {
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
		if ok, _ := path.Match("cmd/*/*_exercises.go", p); ok {
			if b, err = dropExerciseBuildLine(b); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
		}
		if strings.HasPrefix(p, "exercises/") && strings.HasSuffix(p, ".go") {
			var moved []string
			if b, moved, err = exercisesInsteadOfSolutions(root, p, b); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			for _, m := range moved {
				st.rewired = append(st.rewired, p+": "+m)
			}
		}
		if err := writeExportFile(dir, p, b, fi.Mode().Perm()); err != nil {
			return nil, err
		}
		copied[p] = true
		st.files++
	}
	// Each deleted *_solutions.go must leave its exercises twin behind, or
	// that command would lose the code it needs.
	for _, p := range solutionCmds {
		twin := strings.TrimSuffix(p, "_solutions.go") + "_exercises.go"
		if !copied[twin] {
			return nil, fmt.Errorf("%s has no %s beside it: the template's %s would not build", p, path.Base(twin), path.Dir(p))
		}
	}

	for _, f := range []struct{ from, to string }{{templateWorkflow, exportWorkflow}, {templateReadme, "README.md"}, {templateAttrs, ".gitattributes"}} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.from)))
		if err != nil {
			return nil, fmt.Errorf("the template's %s: %w", f.to, err)
		}
		if err := writeExportFile(dir, f.to, b, 0o644); err != nil {
			return nil, err
		}
		st.files++
	}

	if bad, err := importsOfSolutions(dir); err != nil {
		return nil, err
	} else if len(bad) > 0 {
		return nil, fmt.Errorf("these files import ratelab/solutions, which a learner template does not have: %s", strings.Join(bad, ", "))
	}

	m, err := grader.WriteManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("write the manifest: %w", err)
	}
	st.frozen = len(m.Files)
	st.files++
	return st, nil
}

// prepareExportDir makes sure dir exists and is empty. It reports whether it
// created dir.
func prepareExportDir(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, usagef("create %s: %v", dir, err)
		}
		return true, nil
	case err != nil:
		return false, usagef("%s: %v", dir, err)
	case !fi.IsDir():
		return false, usagef("%s is a file; give a new or empty folder", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, usagef("%s: %v", dir, err)
	}
	if len(entries) > 0 {
		return false, usagef("%s is not empty; give a new or empty folder", dir)
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

func writeExportFile(dir, p string, b []byte, perm fs.FileMode) error {
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

// gitUntracked counts the files git does not track and does not ignore, and
// names a few.
func gitUntracked(root string) (int, []string) {
	out, err := gitOutput(root, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return 0, nil
	}
	var n int
	var some []string
	for _, p := range splitNUL(out) {
		if exportSkip(p) {
			continue // left out anyway
		}
		n++
		if len(some) < 3 {
			some = append(some, p)
		}
	}
	return n, some
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
// no .git, no local runs, no built binaries, nothing under skip (the
// export's own folder, if it is inside root).
func walkFiles(root, skip string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
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
// the blank lines after it) from a cmd/*/*_exercises.go file, so that it is
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
func exercisesInsteadOfSolutions(root, name string, src []byte) ([]byte, []string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
	if err != nil {
		return src, nil, nil
	}
	var out bytes.Buffer
	var moved []string
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
		out.WriteString(strconv.Quote("ratelab/exercises/" + pkg))
		last = end
		moved = append(moved, fmt.Sprintf("imports ratelab/exercises/%s instead of %s", pkg, ip))
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
