package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/cohortgen"
	"ratelab/results"
)

// grade cohort, as an instructor runs it, on a generated class with
// interrupted runs among them: every document counted, the interrupted ones
// as interrupted with no score, never as a fail.
func TestCohortCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grade")
	}
	bin := filepath.Join(t.TempDir(), "grade")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	const n = 60
	class := t.TempDir()
	_, err = cohortgen.Write(class, n, 7)
	require.NoError(t, err)
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(bin, "cohort", class, "--out", report)
	cmd.Env = append(os.Environ(), results.SigningKeyEnv+"=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "cohort: 60 documents, 0 skipped")
	assert.FileExists(t, filepath.Join(report, "index.html"))

	b, err := os.ReadFile(filepath.Join(report, "checks.csv"))
	require.NoError(t, err)
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	require.NoError(t, err)
	status, score := slices.Index(rows[0], "doc_status"), slices.Index(rows[0], "doc_score")
	interrupted := map[string]bool{}
	for _, r := range rows[1:] {
		if r[status] == string(results.StatusInterrupted) {
			interrupted[r[0]] = true
			assert.Empty(t, r[score], "an interrupted document has no score: %v", r[:9])
		}
	}
	// The class has interrupted documents; each is one of them in the CSV.
	want := 0
	for i := range n {
		d, err := results.Decode(mustOpen(t, filepath.Join(class, filepathLearner(i))))
		require.NoError(t, err)
		if d.Interrupted {
			want++
			assert.True(t, interrupted[filepath.Join(class, filepathLearner(i))], "learner %d is interrupted in checks.csv", i)
		}
	}
	require.Positive(t, want, "the generated class has interrupted runs")
	assert.Len(t, interrupted, want)
}

func filepathLearner(i int) string {
	return filepath.Join(fmt.Sprintf("learner%05d", i), "results.json")
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}
