package main

import (
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// grade list's last run of a task: a finished run by its score, an
// interrupted one as interrupted, with no score and no failure.
func TestLastRunsInterrupted(t *testing.T) {
	runs := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, interrupted := range []bool{false, true} {
		task := []string{"task1", "task2"}[i]
		doc := &results.Document{Schema: results.Schema, Task: task, Impl: "exercises", Started: at, Finished: at, Runs: []*results.Run{},
			Interrupted: interrupted, Checks: []results.Check{
				{Task: task, Name: "a", Status: results.StatusPass, Score: 2, MaxScore: 2},
				{Task: task, Name: "b", Status: results.StatusSkip, MaxScore: 3},
			}}
		doc.Total()
		require.NoError(t, results.WriteFile(filepath.Join(runs, task, "results.json"), doc, false))
	}
	last := lastRuns(runs, io.Discard)
	assert.Contains(t, last["task1"], "2/5, 1 check(s) not passed")
	assert.Contains(t, last["task2"], "interrupted, no score")
	assert.NotContains(t, last["task2"], "2/5")
	assert.NotContains(t, last["task2"], "not passed")
}
