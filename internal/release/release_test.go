package release

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/grader"
	"ratelab/internal/layout"
	"ratelab/results"
)

// A destination that is a file or a folder that is not empty is refused
// with a *DirError, and nothing is written.
func TestExportRefusesDir(t *testing.T) {
	root, err := grader.FindRoot(".")
	require.NoError(t, err)
	full := t.TempDir()
	file := filepath.Join(full, "x")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, dir := range []string{full, file} {
		st, err := Export(root, dir)
		var de *DirError
		assert.ErrorAs(t, err, &de, "Export(%q) = %v; want a *DirError", dir, err)
		assert.Nil(t, st)
	}
	entries, err := os.ReadDir(full)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a refused export writes nothing")
}

func TestDropExerciseBuildLine(t *testing.T) {
	got, err := dropExerciseBuildLine([]byte("//go:build ratelab_ex_bucket\n\npackage main\n\nimport \"ratelab/exercises/bucket\"\n"))
	require.NoError(t, err)
	assert.Equal(t, "package main\n\nimport \"ratelab/exercises/bucket\"\n", string(got))
	for _, src := range []string{
		"package main\n",
		"//go:build !ratelab_ex_bucket\n\npackage main\n",
		"//go:build ratelab_ex_bucket && linux\n\npackage main\n",
		"//go:build exercises\n\npackage main\n",
	} {
		_, err := dropExerciseBuildLine([]byte(src))
		assert.Error(t, err, "dropExerciseBuildLine(%q) = nil error; want one", src)
	}
}

func TestExercisesInsteadOfSolutions(t *testing.T) {
	root, err := grader.FindRoot(".")
	require.NoError(t, err)
	src := "package x\n\nimport (\n\t\"fmt\"\n\n\t\"ratelab/lab\"\n\t\"ratelab/solutions/bucket\"\n)\n\nvar _ = fmt.Sprint\n"
	got, moved, err := exercisesInsteadOfSolutions(root, "exercises/x/x.go", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, "package x\n\nimport (\n\t\"fmt\"\n\n\t\"ratelab/exercises/bucket\"\n\t\"ratelab/lab\"\n)\n\nvar _ = fmt.Sprint\n", string(got))
	assert.Equal(t, []Rewire{{File: "exercises/x/x.go", From: "ratelab/solutions/bucket", To: "ratelab/exercises/bucket"}}, moved)
	assert.Equal(t, "exercises/x/x.go: imports ratelab/exercises/bucket instead of ratelab/solutions/bucket", moved[0].String())

	same, moved, err := exercisesInsteadOfSolutions(root, "x.go", []byte("package x\n\nimport \"ratelab/lab\"\n"))
	require.NoError(t, err)
	assert.Empty(t, moved)
	assert.Equal(t, "package x\n\nimport \"ratelab/lab\"\n", string(same))

	_, _, err = exercisesInsteadOfSolutions(root, "x.go", []byte("package x\n\nimport \"ratelab/solutions/nosuch\"\n"))
	assert.Error(t, err)
}

func TestSkip(t *testing.T) {
	for p, want := range map[string]bool{
		"solutions/bucket/bucket.go":                   true,
		"grader/testdata/wrong/task2/x/shedding.go":    true,
		"grader/testdata/wrong/task2/x/shedding.patch": true,
		"grader/testdata/broken/task2/panics/x.patch":  true,
		"grader/corpus_test.go":                        true,
		"grader/stages.go":                             false,
		layout.ManifestPath:                            true,
		".github/workflows/ci.yml":                     true,
		".ci/run":                                      true,
		".git/config":                                  true,
		"ratelab-runs/all/results.json":                true,
		"internal/trees/bucket/solutions.go":           true,
		"internal/trees/bucket/exercises.go":           false,
		"cmd/grade/main_test.go":                       false,
		"cmd/grade/export.go":                          false,
		"internal/release/release.go":                  false,
		"internal/release/release_test.go":             true,
		"exercises/bucket/bucket_test.go":              false,
		"internal/suites/bucketsuite/suite.go":         false,
		"reports/testdata/cohort/alice/results.json":   false,
		"template/README.md":                           true,
		"README.md":                                    true,
		".gitattributes":                               true,
		Workflow:                                       true,
		"docs/CLASSROOM.md":                            true,
		"docs/tasks/task2.md":                          false,
		"go.mod":                                       false,
	} {
		assert.Equal(t, want, skip(p), "skip(%q) = %v; want %v", p, !want, want)
	}
}

// TestExport writes a learner template, builds and vets it, and grades
// task 2's stubs with the template's own grader: 0 points, "not
// implemented".
func TestExport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds, vets and grades the exported template: about a minute")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := grader.FindRoot(".")
	require.NoError(t, err)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "template")
	start := time.Now()
	st, err := Export(root, dir)
	require.NoError(t, err)
	t.Logf("export: %d files from %s, %d frozen, %d untracked left out (%s)", st.Files, st.Source, st.Frozen, len(st.Untracked), time.Since(start).Round(time.Millisecond))
	assert.Equal(t, dir, st.Dir)
	assert.Positive(t, st.Frozen)
	assert.Greater(t, st.Files, st.Frozen)

	// What must not be there.
	for _, p := range []string{"solutions", "grader/testdata", ".ci", ".github/workflows/ci.yml", "template", "ratelab-runs", "docs/CLASSROOM.md"} {
		_, err := os.Stat(filepath.Join(dir, p))
		assert.True(t, errors.Is(err, fs.ErrNotExist), "%s must not be in the template", p)
	}
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		assert.False(t, layout.ReferenceOnly(rel), "%s belongs to the reference alone", rel)
		if tree, ok := layout.AdapterHalf(rel); ok && tree == layout.Exercises {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.NotContains(t, string(b), "//go:build", "%s builds by default", rel)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, st.Files, files, "Stats.Files counts the files written")
	bad, err := importsOfSolutions(dir)
	require.NoError(t, err)
	assert.Empty(t, bad, "imports of ratelab/solutions")

	// What must be there: the template's own files, the manifest.
	for _, f := range templateFiles {
		want, err := os.ReadFile(filepath.Join(root, f.from))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, f.to))
		require.NoError(t, err, "%s", f.to)
		assert.Equal(t, string(want), string(got), "%s is %s", f.to, f.from)
	}
	for _, p := range []string{Workflow, layout.ManifestPath, "go.mod", "go.sum", "exercises/shedding/shedding.go", "exercises/shedding/shedding_test.go", "docs/tasks/task2.md", "internal/release/release.go"} {
		assert.FileExists(t, filepath.Join(dir, p))
	}

	// The template builds and vets on its own, sharing this module cache.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := exportEnv()
	goCmd := func(args ...string) (string, error) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		t.Logf("go %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return string(b), err
	}
	if out, err := goCmd("build", "./..."); err != nil {
		t.Fatalf("go build ./... in the template: %v\n%s", err, out)
	}
	if out, err := goCmd("vet", "./..."); err != nil {
		t.Fatalf("go vet ./... in the template: %v\n%s", err, out)
	}
	bin := filepath.Join(tmp, "grade")
	if out, err := goCmd("build", "-o", bin, "./cmd/grade"); err != nil {
		t.Fatalf("go build ./cmd/grade in the template: %v\n%s", err, out)
	}
	gradeCmd := func(args ...string) (int, string) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		t.Logf("grade %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("grade %s: %v", strings.Join(args, " "), err)
		}
		return cmd.ProcessState.ExitCode(), string(b)
	}

	// The manifest matches the files it was written from.
	code, gout := gradeCmd("manifest")
	require.Equal(t, 0, code, gout)
	assert.NotContains(t, gout, "differs")

	// Task 2's stubs score 0, every unit check saying "not implemented";
	// exit 1 (fail), or 3 when the machine was too busy for floods.
	resDir := filepath.Join(tmp, "task2")
	code, gout = gradeCmd("task2", "--no-report", "--out", resDir)
	f, err := os.Open(filepath.Join(resDir, "results.json"))
	require.NoError(t, err, gout)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	calibration := false
	for _, c := range doc.Checks {
		if c.Name == "calibration" && c.Status == results.StatusError {
			calibration = true // a busy machine: floods were not run, status error, exit 3
		}
	}
	if calibration {
		assert.Equal(t, 3, code, gout)
	} else {
		assert.Equal(t, 1, code, gout)
	}
	assert.Equal(t, 0.0, doc.Score)
	assert.Greater(t, doc.MaxScore, 0.0)
	require.NotNil(t, doc.Integrity)
	assert.Empty(t, doc.Integrity.Mismatched)
	assert.NotContains(t, doc.Integrity.Manifest, "none", "graded against the template's manifest")
	units := 0
	for _, c := range doc.Checks {
		if strings.HasPrefix(c.Name, "unit: ") {
			units++
			assert.Equal(t, results.StatusFail, c.Status, c.Name)
			assert.Contains(t, c.Message, "not implemented", c.Name)
		}
	}
	assert.Positive(t, units, "unit checks")
}

// exportEnv is this process's environment for the go and grade commands run
// in an exported template: modules may be added to its go.mod, and nothing
// is written to a CI runner's output files.
func exportEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GOFLAGS", "GOWORK":
			continue
		}
		env = append(env, kv)
	}
	flags := []string{"-mod=mod"}
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-mod=") {
			flags = append(flags, f)
		}
	}
	return append(env, "GOFLAGS="+strings.Join(flags, " "), "GOWORK=off")
}
