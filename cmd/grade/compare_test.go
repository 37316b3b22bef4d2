package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/compare"
	"ratelab/results"
)

// compareDoc writes a task1 results document with one wall-clock flood of
// ok successes into dir/results.json.
func compareDoc(t *testing.T, dir, task string, ok int64) {
	t.Helper()
	d := &results.Document{
		Schema: results.Schema, Task: task, Impl: "exercises",
		Checks: []results.Check{{Task: task, Name: "120/s: successes", Status: results.StatusPass, Score: 1, MaxScore: 1,
			Measured: map[string]float64{"ok": float64(ok)}, Run: "120/s"}},
		Runs: []*results.Run{{Name: "120/s", Clock: results.ClockWall, OfferedRPS: 120, DurationS: 10, OK: ok,
			GoodputRPS: float64(ok) / 10, Counts: map[results.Outcome]int64{results.OutcomeOK: ok}}},
		Env: results.CurrentEnv("test"),
	}
	d.Total()
	require.NoError(t, results.WriteFile(filepath.Join(dir, "results.json"), d, false))
}

// grade compare, as a user runs it: two documents, two folders of
// repeats (text, --json and --html), and the inputs it refuses.
func TestCompareCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grade")
	}
	bin := filepath.Join(t.TempDir(), "grade")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	gradeRun := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, o.String(), e.String()
	}

	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	for i, ok := range []int64{210, 212, 214, 216, 218} {
		compareDoc(t, filepath.Join(before, "run"+string(rune('1'+i))), "task1", ok)
		compareDoc(t, filepath.Join(after, "run"+string(rune('1'+i))), "task1", ok+100)
	}

	// Two documents: the delta, untested.
	code, stdout, stderr := gradeRun("compare", filepath.Join(before, "run1", "results.json"), filepath.Join(after, "run1"))
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "+100 (+47.6%)")
	assert.Contains(t, stdout, "not tested: one run")

	// Two folders of five repeats: significant.
	page := filepath.Join(dir, "page", "compare.html")
	code, stdout, stderr = gradeRun("compare", before, after, "--json", "--html", page)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var c compare.Comparison
	require.NoError(t, json.Unmarshal([]byte(stdout), &c))
	assert.Equal(t, 5, c.A.Repeats)
	var ok *compare.Figure
	for i, f := range c.Figures {
		if f.Section == "run" && f.Key == "ok" {
			ok = &c.Figures[i]
		}
	}
	require.NotNil(t, ok, "the flood's successes are a figure")
	assert.Equal(t, compare.ChangeSignificant, ok.Change)
	require.NotNil(t, ok.Test)
	assert.Less(t, ok.Test.P, 0.05)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Goodput against offered load")
	assert.FileExists(t, filepath.Join(dir, "page", "echarts.min.js"))

	// A folder against itself: nothing significant.
	code, stdout, _ = gradeRun("compare", before, before, "--changed")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "not shown")
	assert.NotContains(t, stdout, "p=0.0")

	// Refused: different tasks, a file that is no document, one argument.
	other := filepath.Join(dir, "other")
	compareDoc(t, other, "task2", 1)
	code, _, stderr = gradeRun("compare", before, other)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, filepath.Join(other, "results.json"))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{"), 0o644))
	code, _, stderr = gradeRun("compare", before, bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "bad.json: truncated JSON")
	code, _, _ = gradeRun("compare", before)
	assert.Equal(t, 2, code)
}
