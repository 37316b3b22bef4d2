package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// clocksDoc writes a document of task with the given runs into
// dir/results.json and returns dir.
func clocksDoc(t *testing.T, dir, task string, runs ...*results.Run) string {
	t.Helper()
	d := &results.Document{Schema: results.Schema, Task: task, Impl: "solutions", Runs: runs,
		Checks: []results.Check{{Task: task, Name: "a check", Status: results.StatusPass, Score: 1, MaxScore: 1}},
		Env:    results.CurrentEnv("test")}
	d.Total()
	require.NoError(t, results.WriteFile(filepath.Join(dir, "results.json"), d, false))
	return dir
}

// grade clocks on the documents of one task: a task that floods nothing
// has nothing to disagree on, and passes; documents given in the wrong
// order, or floods without a twin, do not.
func TestClocksOneTask(t *testing.T) {
	flood := func(clock results.Clock, ok int64) *results.Run {
		return &results.Run{Name: "120/s", Task: "task1", Clock: clock, OfferedRPS: 120, DurationS: 10, OK: ok,
			Counts: map[results.Outcome]int64{results.OutcomeOK: ok}}
	}
	dir := t.TempDir()
	noneV := clocksDoc(t, filepath.Join(dir, "task5-virtual"), "task5")
	noneW := clocksDoc(t, filepath.Join(dir, "task5-real"), "task5")
	virtual := clocksDoc(t, filepath.Join(dir, "task1-virtual"), "task1", flood(results.ClockVirtual, 216))
	wall := clocksDoc(t, filepath.Join(dir, "task1-real"), "task1", flood(results.ClockWall, 214))

	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"clocks", noneV, noneW}, exitPass, "neither document has a flood or storm"},
		{[]string{"clocks", virtual, wall}, exitPass, "the clocks agree: 1 figures"},
		{[]string{"clocks", wall, virtual}, exitFail, "nothing to compare"},
		{[]string{"clocks", virtual, noneW}, exitFail, "nothing to compare"},
	}
	for _, tt := range tests {
		code, out, errOut := runCapture(t, context.Background(), tt.args...)
		assert.Equal(t, tt.code, code, "grade %v: exit code; stdout %q, stderr %q", tt.args, out, errOut)
		assert.Contains(t, out+errOut, tt.want, "grade %v", tt.args)
	}
}
