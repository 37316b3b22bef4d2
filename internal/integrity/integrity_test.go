package integrity

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return root
}

func TestIntegrity(t *testing.T) {
	root := writeTree(t, map[string]string{
		"exercises/bucket/bucket.go":      "package bucket // the learner's",
		"exercises/bucket/bucket_test.go": "package bucket // frozen",
		"internal/suites/x/suite.go":      "package x",
		"grader/grader.go":                "package grader",
		"harness/flood.go":                "package harness",
		"reports/html.go":                 "package reports",
		"internal/trees/x/solutions.go":   "package x // the reference's",
		"solutions/bucket/bucket.go":      "package bucket",
		"grader/testdata/wrong/a/b.go":    "package b",
	})
	rec, bad, err := CheckIntegrity(root)
	require.NoError(t, err)
	assert.Empty(t, bad, "no manifest: nothing enforced")
	assert.Contains(t, rec.Manifest, "none")
	assert.Equal(t, 5, rec.Files, "frozen: the exercise test, the suite, the grader, the harness, the reports")

	_, err = WriteManifest(root)
	require.NoError(t, err)
	_, bad, err = CheckIntegrity(root)
	require.NoError(t, err)
	assert.Empty(t, bad, "unchanged tree")

	// The learner edits their own file: fine.
	require.NoError(t, os.WriteFile(filepath.Join(root, "exercises/bucket/bucket.go"), []byte("package bucket // solved"), 0o644))
	_, bad, err = CheckIntegrity(root)
	require.NoError(t, err)
	assert.Empty(t, bad, "editing the exercise is the point")

	// Editing a frozen test, removing the harness or adding a grader file is not.
	require.NoError(t, os.WriteFile(filepath.Join(root, "exercises/bucket/bucket_test.go"), []byte("package bucket // weakened"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(root, "harness/flood.go")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "grader/extra.go"), []byte("package grader"), 0o644))
	rec, bad, err = CheckIntegrity(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"exercises/bucket/bucket_test.go (changed)", "grader/extra.go (added)", "harness/flood.go (missing)"}, bad)
	assert.Equal(t, bad, rec.Mismatched)
}

// TestEditedFrozenFilesInvalidateTheScore edits a frozen suite in a copy of
// a development checkout: the grade must say its score is not valid.
func TestEditedFrozenFilesInvalidateTheScore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	run("init", "-q")
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("internal/suites/x/suite.go", "package x\n")
	write("exercises/x/x.go", "package x\n")
	run("add", ".")
	run("commit", "-qm", "start")

	rec, bad, err := CheckIntegrity(dir)
	require.NoError(t, err)
	assert.Empty(t, bad)
	assert.Empty(t, rec.Edited, "a clean checkout has nothing edited")

	write("exercises/x/x.go", "package x\n\nvar Learner = 1\n") // the learner's own file: fine
	write("internal/suites/x/suite.go", "package x\n\nvar Easier = true\n")
	write("exercises/x/extra_test.go", "package x\n")
	rec, _, err = CheckIntegrity(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"exercises/x/extra_test.go", "internal/suites/x/suite.go"}, rec.Edited)
	c := EditedCheck("task1", rec.Edited)
	assert.Equal(t, results.StatusError, c.Status)
	assert.Contains(t, c.Message, "frozen tests edited: this score is not valid")
}
