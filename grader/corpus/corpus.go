// Package corpus reads the grader's corpus of known-wrong and broken code.
//
// Each variant is one patch against the reference under solutions/: the
// reference with one mistake. It lives at
//
//	grader/testdata/<kind>/<task>/<name>.patch
//
// where kind is wrong (it builds and runs, but a named subtest or flood
// check must catch it), broken (it does not build, panics, hangs or races,
// and the grader must say so) or right (correct code written otherwise,
// which must score full marks). The patch is a git-style unified diff with paths relative to
// the repository root (a/solutions/<pkg>/<file>), which `git apply --check`
// accepts too; a plain `diff -u` with those paths as labels also does. It
// may change several files of one package, Go or not. The free text before
// the diff describes the mistake, and its "Caught-By: <subtest>" and
// "Caught-By-Check: <check>" lines name the subtests and flood checks that
// must fail. See grader/testdata/README.md.
//
// Because a variant stores only its mistake, a change to the reference
// reaches every variant: a hunk may move (its context is searched for, as
// git apply does), but a change to the lines a hunk touches or shows as
// context makes Apply fail, naming the patch, the file, the hunk and the
// line that differs.
package corpus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// Dir is the corpus folder, relative to the repository root.
const Dir = "grader/testdata"

// Kind says what a variant is for.
type Kind string

// The kinds of variant, each a folder under Dir.
const (
	// Wrong code builds and runs but breaks a rule of the task: its unit
	// stage must lose points, with a failed check naming each Caught-By
	// subtest.
	Wrong Kind = "wrong"
	// Broken code does not build, panics, deadlocks or races: the grader
	// must report it without crashing or hanging.
	Broken Kind = "broken"
	// Right code is correct but written otherwise than the reference (a
	// GCRA bucket, a sharded limiter, another retry loop): the grader must
	// give it full marks, floods included. It proves the checks judge the
	// task's promises, not the reference's way of keeping them.
	Right Kind = "right"
)

// The folders that graded code comes from and goes to.
const (
	solutions = "solutions"
	exercises = "exercises"
)

// caughtByKey starts a preamble line that names a subtest which must catch
// the variant; checkKey one that names a flood check which must catch it;
// raceKey the line "Needs-Race: yes", for a variant whose subtests fail
// every time only under the race detector.
const (
	caughtByKey = "Caught-By:"
	checkKey    = "Caught-By-Check:"
	raceKey     = "Needs-Race:"
)

// Variant is one entry of the corpus: a patch that puts one mistake into the
// reference of a task.
type Variant struct {
	Kind Kind
	// Task is the task's id, such as "task3": the folder under the kind.
	Task string
	// Name is the patch's file name without ".patch", such as "no-cap".
	Name string
	// Path is the patch file, relative to the repository root, with
	// forward slashes.
	Path string
	// Package is the folder under solutions/ and exercises/ that the patch
	// changes, such as "bucket".
	Package string
	// Files are the repository paths the patch changes, such as
	// "solutions/bucket/bucket.go", in the patch's order.
	Files []string
	// Summary is the patch's preamble without its Caught-By lines: what the
	// mistake is and what it does.
	Summary string
	// CaughtBy are the subtests that must fail, as the task's Unit names
	// them (the path under its top-level test, such as
	// "TokenBucket/CapsAtBurst"), from the preamble's Caught-By lines.
	CaughtBy []string
	// CaughtByChecks are the grader's flood checks that must fail, by the
	// name the document records (such as "shed 240/s: 503s say when to
	// come back"), from the preamble's Caught-By-Check lines. A variant
	// with them is graded with its floods; one written to pass the unit
	// tests (code that behaves only while tested) has no CaughtBy.
	CaughtByChecks []string
	// NeedsRace is set by the preamble line "Needs-Race: yes": the
	// variant's Caught-By subtests fail every time only under the race
	// detector, which reports its data race, or whose slower code makes
	// the interleaving that loses an update likely. The corpus tests build
	// such a variant with -race, as the grader builds a learner's code, and
	// the others without it, which takes about half the time and shows that
	// a failed assertion, not the detector, catches them.
	NeedsRace bool

	diffs []*gitdiff.File
}

// ID returns the variant's task and name, such as "task3/no-cap".
func (v Variant) ID() string { return v.Task + "/" + v.Name }

// taskRE and nameRE are the folder and file names a variant may have.
var (
	taskRE = regexp.MustCompile(`^task[0-9]+$`)
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// Load reads every variant under root's Dir, wrong ones first, each kind in
// task and name order. Every file under Dir/wrong and Dir/broken must be a
// valid patch (a README.md may sit anywhere): a leftover file is an error,
// and so is a patch that cannot be parsed or that changes anything but
// existing files under solutions/. All the problems found are returned,
// joined. Load does not read the reference: Apply does.
func Load(root string) ([]Variant, error) {
	var (
		out  []Variant
		errs []error
	)
	for _, kind := range []Kind{Wrong, Broken, Right} {
		base := path.Join(Dir, string(kind))
		err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(base)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == filepath.Join(root, filepath.FromSlash(base)) {
					return fs.SkipDir // no variants of this kind
				}
				return err
			}
			if d.IsDir() || d.Name() == "README.md" {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v, err := parse(filepath.ToSlash(rel), b)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			out = append(out, v)
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the corpus: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parse reads the patch at rel (a repository path under Dir) with content
// b.
func parse(rel string, b []byte) (Variant, error) {
	v := Variant{Path: rel}
	parts := strings.Split(strings.TrimPrefix(rel, Dir+"/"), "/")
	if !strings.HasPrefix(rel, Dir+"/") || len(parts) != 3 || !strings.HasSuffix(parts[2], ".patch") {
		return v, fmt.Errorf("%s: not a variant: want %s/<wrong|broken>/<task>/<name>.patch", rel, Dir)
	}
	v.Kind, v.Task, v.Name = Kind(parts[0]), parts[1], strings.TrimSuffix(parts[2], ".patch")
	if v.Kind != Wrong && v.Kind != Broken && v.Kind != Right {
		return v, fmt.Errorf("%s: kind %q is none of %q, %q and %q", rel, v.Kind, Wrong, Broken, Right)
	}
	if !taskRE.MatchString(v.Task) {
		return v, fmt.Errorf("%s: folder %q is not a task id such as task3", rel, v.Task)
	}
	if !nameRE.MatchString(v.Name) {
		return v, fmt.Errorf("%s: name %q: use lowercase letters, digits and dashes", rel, v.Name)
	}

	diffs, preamble, err := gitdiff.Parse(bytes.NewReader(b))
	if err != nil {
		return v, fmt.Errorf("%s: %w", rel, err)
	}
	if len(diffs) == 0 {
		return v, fmt.Errorf("%s: no diff in it: want a preamble, then a git-style diff against %s/", rel, solutions)
	}
	v.diffs = diffs
	var race string
	v.Summary, v.CaughtBy, v.CaughtByChecks, race = parsePreamble(preamble)
	switch {
	case race == "yes":
		v.NeedsRace = true
	case race != "":
		return v, fmt.Errorf("%s: %s %q: the only value is yes (or leave the line out)", rel, raceKey, race)
	}
	if v.NeedsRace && (v.Kind != Wrong || len(v.CaughtBy) == 0) {
		return v, fmt.Errorf("%s: %s is for a wrong variant whose %s subtests need the race detector", rel, raceKey, caughtByKey)
	}
	if v.Summary == "" {
		return v, fmt.Errorf("%s: the preamble (the text before the first diff) must say what is wrong", rel)
	}
	if v.Kind == Right && len(v.CaughtBy)+len(v.CaughtByChecks) > 0 {
		return v, fmt.Errorf("%s: a right variant must pass everything, so it names nothing that catches it", rel)
	}
	if v.Kind == Wrong && len(v.CaughtBy) == 0 && len(v.CaughtByChecks) == 0 {
		return v, fmt.Errorf("%s: a wrong variant needs at least one %q line naming the subtest that catches it, or a %q line naming the flood check", rel, caughtByKey, checkKey)
	}
	for _, f := range diffs {
		name, err := checkFile(f)
		if err != nil {
			return v, fmt.Errorf("%s: %w", rel, err)
		}
		pkg := strings.Split(name, "/")[1]
		if v.Package == "" {
			v.Package = pkg
		} else if pkg != v.Package {
			return v, fmt.Errorf("%s: changes both %s/%s and %s/%s: a variant is a mistake in one package", rel, solutions, v.Package, solutions, pkg)
		}
		if slices.Contains(v.Files, name) {
			return v, fmt.Errorf("%s: changes %s twice: give each file one diff", rel, name)
		}
		v.Files = append(v.Files, name)
	}
	return v, nil
}

// checkFile returns the repository path that diff f changes, or why a
// variant may not contain it.
func checkFile(f *gitdiff.File) (string, error) {
	oldName, newName := f.OldName, f.NewName
	// Git's own header drops the a/ and b/ prefixes. From a plain diff -u,
	// whose labels keep them, gitdiff takes one name for both sides.
	if oldName == newName {
		for _, prefix := range []string{"a/", "b/"} {
			if rest, ok := strings.CutPrefix(oldName, prefix); ok {
				oldName, newName = rest, rest
				break
			}
		}
	}
	switch {
	case f.IsNew, f.IsDelete, f.IsRename, f.IsCopy:
		return "", fmt.Errorf("%s → %s: a variant changes files of the reference, it does not create, delete, rename or copy them", oldName, newName)
	case f.IsBinary:
		return "", fmt.Errorf("%s: binary diffs are not supported", oldName)
	case oldName != newName:
		return "", fmt.Errorf("%s and %s: a diff must name the same file on both sides", oldName, newName)
	case len(f.TextFragments) == 0:
		return "", fmt.Errorf("%s: the diff has no hunk", oldName)
	}
	for _, frag := range f.TextFragments {
		if frag.OldLines == 0 {
			return "", fmt.Errorf("%s: hunk %s has no context: make the diff with context lines (diff -u, git diff)", oldName, strings.TrimSpace(frag.Header()))
		}
	}
	parts := strings.Split(oldName, "/")
	if len(parts) != 3 || parts[0] != solutions || parts[1] == "" {
		return "", fmt.Errorf("%s: want a file of the reference, %s/<pkg>/<file> (paths in the diff are relative to the repository root)", oldName, solutions)
	}
	if strings.HasSuffix(parts[2], "_test.go") {
		return "", fmt.Errorf("%s: a variant changes the code under test, not the tests", oldName)
	}
	return oldName, nil
}

// parsePreamble splits a patch's preamble into its description, its
// Caught-By subtests, its Caught-By-Check checks and the value of its
// Needs-Race line ("" without one).
func parsePreamble(preamble string) (summary string, caughtBy, checks []string, race string) {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(preamble))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t")
		if rest, ok := strings.CutPrefix(line, checkKey); ok {
			if s := strings.TrimSpace(rest); s != "" {
				checks = append(checks, s)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, caughtByKey); ok {
			if s := strings.TrimSpace(rest); s != "" {
				caughtBy = append(caughtBy, s)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, raceKey); ok {
			race = strings.TrimSpace(rest)
			continue
		}
		lines = append(lines, line)
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), caughtBy, checks, race
}

// Apply writes the variant's patched files into dir (which should be empty,
// such as a test's t.TempDir()) and returns the overlay that grades the
// variant as the exercise: every file of solutions/<pkg> that is not a test,
// patched where the patch says, mapped from its path under exercises/<pkg>
// (such as "exercises/bucket/bucket.go") to the file to read instead. That
// is the form of grader.Options.Replace.
//
// A hunk whose context and removed lines are no longer in the reference
// fails Apply with an error naming the patch, the file, the hunk and the
// first line that differs; so does a patch that leaves a file as it was.
func (v Variant) Apply(root, dir string) (map[string]string, error) {
	pkgDir := filepath.Join(root, solutions, v.Package)
	entries, err := os.ReadDir(pkgDir)
	if err != nil {
		return nil, fmt.Errorf("%s: the reference: %w", v.Path, err)
	}
	replace := map[string]string{}
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), "_test.go") {
			replace[path.Join(exercises, v.Package, e.Name())] = filepath.Join(pkgDir, e.Name())
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i, f := range v.diffs {
		name := v.Files[i]
		ref, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("%s: the file it changes: %w", v.Path, err)
		}
		out, err := applyFile(ref, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", v.Path, name, err)
		}
		if bytes.Equal(out, ref) {
			return nil, fmt.Errorf("%s: %s: the patched file is the reference itself: a variant must change what it patches", v.Path, name)
		}
		dst := filepath.Join(dir, path.Base(name))
		if err := os.WriteFile(dst, out, 0o644); err != nil {
			return nil, err
		}
		replace[path.Join(exercises, v.Package, path.Base(name))] = dst
	}
	return replace, nil
}

// applyFile applies f's hunks to ref. A hunk that does not match where it
// says is looked for nearby, as git apply does: the first place, nearest
// first, where its context and removed lines all appear unchanged and after
// the previous hunk. Nothing fuzzier is accepted.
func applyFile(ref []byte, f *gitdiff.File) ([]byte, error) {
	lines := splitLines(ref)
	frags := slices.Clone(f.TextFragments)
	sort.SliceStable(frags, func(i, j int) bool { return frags[i].OldPosition < frags[j].OldPosition })
	var out bytes.Buffer
	a := gitdiff.NewTextApplier(&out, bytes.NewReader(ref))
	next := 0 // the first line of ref no hunk has used
	for i, frag := range frags {
		at, ok := locate(lines, frag, next)
		if !ok {
			return nil, mismatch(lines, frag, i+1, len(frags))
		}
		moved := *frag
		delta := int64(at) - (frag.OldPosition - 1)
		moved.OldPosition += delta
		moved.NewPosition += delta
		if err := a.ApplyFragment(&moved); err != nil {
			return nil, fmt.Errorf("hunk %d of %d (%s): %w", i+1, len(frags), strings.TrimSpace(frag.Header()), err)
		}
		next = at + int(frag.OldLines)
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// splitLines splits b after each newline; the last line may lack one.
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, string(b))
			break
		}
		lines = append(lines, string(b[:i+1]))
		b = b[i+1:]
	}
	return lines
}

// oldLines returns the lines a hunk expects to find: its context and the
// lines it removes, in order.
func oldLines(frag *gitdiff.TextFragment) []string {
	var old []string
	for _, l := range frag.Lines {
		if l.Old() {
			old = append(old, l.Line)
		}
	}
	return old
}

// locate returns the 0-based line, not before from, where frag's old lines
// appear in lines: where frag says if they are there, else the nearest
// place that has them.
func locate(lines []string, frag *gitdiff.TextFragment, from int) (int, bool) {
	old := oldLines(frag)
	at := int(frag.OldPosition) - 1
	matches := func(p int) bool {
		if p < from || p+len(old) > len(lines) {
			return false
		}
		for j, l := range old {
			if lines[p+j] != l {
				return false
			}
		}
		return true
	}
	for d := 0; d <= len(lines); d++ {
		if matches(at - d) {
			return at - d, true
		}
		if d > 0 && matches(at+d) {
			return at + d, true
		}
	}
	return 0, false
}

// mismatch describes why hunk n of total, frag, matches nowhere in lines:
// the first line at its own position that differs from what it expects.
func mismatch(lines []string, frag *gitdiff.TextFragment, n, total int) error {
	hunk := fmt.Sprintf("hunk %d of %d (%s)", n, total, strings.TrimSpace(frag.Header()))
	at := int(frag.OldPosition) - 1
	for j, want := range oldLines(frag) {
		p := at + j
		if p >= len(lines) {
			return fmt.Errorf("%s does not apply: the reference ends at line %d, the hunk expects line %d to be %q (nor do its lines appear anywhere else)",
				hunk, len(lines), p+1, strings.TrimSuffix(want, "\n"))
		}
		if lines[p] != want {
			return fmt.Errorf("%s does not apply: line %d of the reference is %q, the hunk expects %q (nor do its lines appear anywhere else)",
				hunk, p+1, strings.TrimSuffix(lines[p], "\n"), strings.TrimSuffix(want, "\n"))
		}
	}
	// The lines are all there at its position, so an earlier hunk used them.
	return fmt.Errorf("%s does not apply: it overlaps the hunk before it", hunk)
}
