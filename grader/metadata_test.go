package grader

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetadataMatchesFiles keeps the task table honest: every file, handout
// and test it names exists, stubs mark their edit sites, tests are the same
// in both trees, and hints teach without code.
func TestMetadataMatchesFiles(t *testing.T) {
	root := repoRoot(t)
	seen := map[string]bool{}
	last := 0
	for _, task := range Tasks() {
		assert.Greater(t, task.Number, last, "%s: tasks are listed in number order", task.ID)
		assert.Equal(t, fmt.Sprintf("task%d", task.Number), task.ID, "%s: the id matches the number", task.ID)
		last = task.Number
		assert.False(t, seen[task.ID], "duplicate task %s", task.ID)
		seen[task.ID] = true
		assert.FileExists(t, filepath.Join(root, task.Handout), "%s: handout", task.ID)
		readme, err := os.ReadFile(filepath.Join(root, "README.md"))
		require.NoError(t, err)
		assert.Contains(t, string(readme), task.Handout, "%s: the README links the handout", task.ID)

		assert.True(t, len(task.Hints) >= 1, "%s: at least one hint", task.ID)
		for _, h := range task.Hints {
			lines := strings.Count(h, "\n") + 1
			assert.True(t, lines >= 2 && lines <= 5, "%s: a hint has 2 to 5 lines, got %d: %q", task.ID, lines, h)
			assert.NotRegexp(t, regexp.MustCompile(`:=|func\s*\(|\)\s*{|;\s*$`), h, "%s: hints contain no code", task.ID)
		}
		if task.Unit == nil {
			assert.Empty(t, task.Files, "%s: a task without unit tests has no files to edit", task.ID)
			continue
		}
		u := task.Unit
		stubPath := filepath.Join("exercises", u.Package, u.File)
		assert.Equal(t, []string{stubPath}, task.Files, "%s: Files names the stub", task.ID)
		stub, err := os.ReadFile(filepath.Join(root, stubPath))
		require.NoError(t, err)
		ref, err := os.ReadFile(filepath.Join(root, "solutions", u.Package, u.File))
		require.NoError(t, err, "%s: the reference exists", task.ID)
		if exercisesPristine(t) {
			todo := "TODO(task" + strings.TrimPrefix(task.ID, "task") + ")"
			assert.Contains(t, string(stub), todo, "%s: the stub marks its edit sites", task.ID)
			if strings.HasSuffix(u.File, ".go") {
				assert.Contains(t, string(stub), "lab.NotImplemented", "%s: the stub fails clearly until written", task.ID)
			} else {
				assert.Contains(t, string(stub), "not implemented yet", "%s: the stub fails clearly until written", task.ID)
			}
		}
		assert.NotRegexp(t, regexp.MustCompile(`(?m)^\s*// TODO\(`), string(ref), "%s: the reference has no TODO left", task.ID)
		assert.NotContains(t, string(ref), "NotImplemented", "%s: the reference is implemented", task.ID)
		assert.NotContains(t, string(ref), "not implemented yet", "%s: the reference is implemented", task.ID)

		// The frozen tests: the same in both trees, apart from the build
		// tag that keeps the stubs out of a plain go test ./....
		tests, err := filepath.Glob(filepath.Join(root, "solutions", u.Package, "*_test.go"))
		require.NoError(t, err)
		found := false
		for _, refTest := range tests {
			if strings.HasSuffix(refTest, "bench_test.go") {
				continue
			}
			exTest := filepath.Join(root, "exercises", u.Package, filepath.Base(refTest))
			a, err := os.ReadFile(refTest)
			require.NoError(t, err)
			b, err := os.ReadFile(exTest)
			require.NoError(t, err, "%s: %s has a twin in exercises/", task.ID, filepath.Base(refTest))
			found = found || strings.Contains(string(a), "func "+u.Test+"(")
			exBody := strings.TrimPrefix(string(b), "//go:build exercises\n\n")
			exBody = strings.ReplaceAll(exBody, "ratelab/exercises/", "ratelab/solutions/")
			assert.Equal(t, sortedLines(string(a)), sortedLines(exBody), "%s: %s differs between the trees", task.ID, filepath.Base(refTest))
			assert.True(t, strings.HasPrefix(string(b), "//go:build exercises\n"), "%s: the exercise test is tagged", task.ID)
		}
		assert.True(t, found, "%s: a test named %s runs the suite", task.ID, u.Test)
	}
}

// sortedLines returns s's lines in order, so that files differing only in
// the order of their imports (gofmt sorts them by path) compare equal.
func sortedLines(s string) []string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return lines
}

// Every suite's test binary must accept the flags the grader passes
// (-rapid.seed and -rapid.nofailfile): they are defined by suitekit's
// import of rapid, so every suite imports suitekit.
func TestEverySuiteImportsSuitekit(t *testing.T) {
	for _, task := range Tasks() {
		if task.Unit == nil {
			continue
		}
		cmd := exec.Command("go", "list", "-deps", "-test", "./"+path.Join(string(Solutions), task.Unit.Package))
		cmd.Dir = repoRoot(t)
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Contains(t, string(out), "pgregory.net/rapid\n", "%s's suite must import ratelab/internal/suites/suitekit", task.ID)
	}
}
