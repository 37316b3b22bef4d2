package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// runCapture runs a command line and returns its exit code and output.
func runCapture(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	stdout, stderr = &out, &errOut
	defer func() { stdout, stderr = os.Stdout, os.Stderr }()
	code := run(ctx, args)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := fmt.Sprint(busy.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"flood"}, "want exactly one RATE"},
		{[]string{"flood", "0"}, "rate 0"},
		{[]string{"flood", "-5"}, "flag provided but not defined"}, // read as a flag
		{[]string{"flood", "--", "-5"}, "rate -5"},
		{[]string{"flood", "NaN"}, `rate "NaN"`},
		{[]string{"flood", "abc"}, `rate "abc"`},
		{[]string{"flood", "1e12"}, "at most"},
		{[]string{"flood", "100", "--seconds", "0"}, "--seconds 0"},
		{[]string{"flood", "100", "--timeout", "-1s"}, "--timeout"},
		{[]string{"flood", "100", "--mode", "turbo"}, `unknown mode "turbo"`},
		{[]string{"flood", "100", "--url", "http://192.168.1.10:8000"}, "only target loopback"},
		{[]string{"flood", "100", "--url", "http://127.0.0.1:1"}, "cannot reach"},
		{[]string{"flood", "100", "--bogus"}, "flag provided but not defined"},
		{[]string{"serve", "--port", busyPort}, "already in use"},
		{[]string{"serve", "--port", "70000"}, "--port 70000"},
		{[]string{"serve", "--slots", "0"}, "slots 0"},
		{[]string{"hint"}, "want one task"},
		{[]string{"hint", "task99"}, `unknown task "task99"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"task1", "extra"}, "takes no arguments"},
		{[]string{"task1", "--repeat", "0"}, "--repeat 0: want 1 to 10"},
		{[]string{"all", "--repeat", "11"}, "--repeat 11: want 1 to 10"},
		{[]string{"--repeat", "-1", "all"}, "--repeat -1: want 1 to 10"}, // before the command
		{[]string{"task2", "--repeat=3x"}, "invalid value"},
	}
	for _, tt := range tests {
		code, _, errOut := runCapture(t, context.Background(), tt.args...)
		assert.Equal(t, exitUsage, code, "grade %s: exit code; stderr %q", strings.Join(tt.args, " "), errOut)
		assert.Contains(t, errOut, tt.want, "grade %s: stderr", strings.Join(tt.args, " "))
		assert.NotContains(t, errOut, "goroutine", "grade %s: a stack trace", strings.Join(tt.args, " "))
		if len(tt.args) > 0 {
			assert.LessOrEqual(t, strings.Count(strings.TrimSpace(errOut), "\n"), 1, "grade %s: one line (plus usage)", strings.Join(tt.args, " "))
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runCapture(t, context.Background(), "help")
	assert.Equal(t, exitPass, code)
	for _, c := range commands {
		assert.Contains(t, out, c.Name, "help lists %s", c.Name)
		code, out, _ := runCapture(t, context.Background(), "help", c.Name)
		assert.Equal(t, exitPass, code, "help %s", c.Name)
		assert.Contains(t, out, "usage: grade "+c.Name, "help %s", c.Name)
	}
	code, out, _ = runCapture(t, context.Background(), "flood", "--help")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "-seconds")
	code, out, _ = runCapture(t, context.Background(), "--help")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "Exit codes")
	code, out, _ = runCapture(t, context.Background(), "help", "all")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "[--repeat N]")
	assert.Contains(t, out, "-repeat int")
}

// A document's status decides the exit code: inconclusive checks are the
// machine's noise (exit 3, like errors), never the learner's fail.
func TestVerdictError(t *testing.T) {
	tests := []struct {
		status results.Status
		want   int
	}{
		{results.StatusPass, exitPass},
		{results.StatusFail, exitFail},
		{results.StatusError, exitGrader},
		{results.StatusInconclusive, exitGrader},
	}
	for _, tt := range tests {
		err := verdictError("all", &results.Document{Status: tt.status, Score: 3, MaxScore: 5})
		var fe failError
		var ue usageError
		got := exitGrader
		switch {
		case err == nil:
			got = exitPass
		case errors.As(err, &ue):
			got = exitUsage
		case errors.As(err, &fe):
			got = exitFail
		}
		assert.Equal(t, tt.want, got, "verdictError(%s) = %v: exit %d; want %d", tt.status, err, got, tt.want)
		if tt.status == results.StatusInconclusive {
			assert.ErrorContains(t, err, "disagreed across repeats")
		}
	}
}

// merge keeps the repeat count of the tasks it folds together.
func TestMergeRepeat(t *testing.T) {
	a := &results.Document{Task: "task1", Repeat: 3, Checks: []results.Check{{Task: "task1", Status: results.StatusPass}}}
	b := &results.Document{Task: "task2", Repeat: 3, Checks: []results.Check{{Task: "task2", Status: results.StatusInconclusive}}}
	doc := merge(merge(nil, a, "all"), b, "all")
	assert.Equal(t, 3, doc.Repeat)
	assert.Equal(t, results.StatusInconclusive, doc.Status)
	assert.Same(t, doc, merge(doc, nil, "all"), "a task that wrote no document adds nothing")
}

func TestListAndHint(t *testing.T) {
	code, out, _ := runCapture(t, context.Background(), "list")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "task1")
	code, out, _ = runCapture(t, context.Background(), "hint", "task1")
	assert.Equal(t, exitPass, code)
	assert.Contains(t, out, "hint 1")
}

func TestFloodInProcess(t *testing.T) {
	code, out, errOut := runCapture(t, context.Background(), "flood", "40", "--seconds", "0.5")
	require.Equal(t, exitPass, code, errOut)
	assert.Contains(t, out, "offered 40/s")
	assert.Contains(t, out, "200: 20")
}

// TestInterruptedTaskWritesPartialResults cancels a task part way, as
// Ctrl-C does, and checks the partial document and the exit code.
func TestInterruptedTaskWritesPartialResults(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a second")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(5*time.Second, cancel) // as Ctrl-C would, after the calibration (about 3 s)
	start := time.Now()
	code, out, errOut := runCapture(t, ctx, "task1", "--out", dir)
	if strings.Contains(out, "calibration: ") && strings.Contains(out, "NOT OK") {
		t.Skip("the machine is too busy for floods (calibration failed), so there is no flood to interrupt")
	}
	assert.Less(t, time.Since(start), 15*time.Second, "stops promptly")
	assert.Equal(t, exitFail, code, errOut)
	assert.Contains(t, errOut, "interrupted")
	f, err := os.Open(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := results.Decode(f)
	require.NoError(t, err)
	assert.True(t, doc.Interrupted)
	assert.Equal(t, results.StatusFail, doc.Status)
	require.NotEmpty(t, doc.Runs)
	assert.True(t, doc.Runs[0].Interrupted)

	// A second run into the same folder refuses to overwrite.
	code, _, errOut = runCapture(t, context.Background(), "task1", "--out", dir)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--force")
}

func TestFloodJSON(t *testing.T) {
	code, out, errOut := runCapture(t, context.Background(), "flood", "20", "--seconds", "0.5", "--json")
	require.Equal(t, exitPass, code, errOut)
	var doc results.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Runs, 1)
	assert.Equal(t, int64(10), doc.Runs[0].OK)
}

// grade report turns a results.json graded earlier into Classroom's result,
// JUnit and a summary without grading again, and exits with its verdict.
func TestReportFormats(t *testing.T) {
	tests := []struct {
		src  string
		code int
	}{
		{"../../reports/testdata/task4.json", exitPass},
		{"../../reports/testdata/cohort/bob/results.json", exitFail},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(filepath.Dir(tt.src)), func(t *testing.T) {
			dir := t.TempDir()
			b, err := os.ReadFile(tt.src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644))
			ghOut := filepath.Join(dir, "github_output")
			t.Setenv("GITHUB_OUTPUT", ghOut)
			junit, summary := filepath.Join(dir, "junit.xml"), filepath.Join(dir, "summary.md")
			code, out, errOut := runCapture(t, context.Background(), "report", "--format", "classroom", "--no-report", "--junit", junit, "--summary", summary, dir)
			assert.Equal(t, tt.code, code, "stderr: %s", errOut)
			assert.NoDirExists(t, filepath.Join(dir, "report"), "--no-report")

			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
			require.NoError(t, err, "stdout is Classroom's base64 result")
			var cls struct {
				MaxScore float64 `json:"max_score"`
				Tests    []struct {
					Name string `json:"name"`
				} `json:"tests"`
			}
			require.NoError(t, json.Unmarshal(raw, &cls))
			var doc results.Document
			require.NoError(t, json.Unmarshal(b, &doc))
			assert.Equal(t, doc.MaxScore, cls.MaxScore)
			assert.Len(t, cls.Tests, len(doc.Checks))

			gh, err := os.ReadFile(ghOut)
			require.NoError(t, err)
			assert.Equal(t, "result="+strings.TrimSpace(out)+"\n", string(gh))
			assert.FileExists(t, junit)
			assert.FileExists(t, summary)
		})
	}
	code, _, errOut := runCapture(t, context.Background(), "report", "--format", "xml", "../../reports/testdata/task4.json")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--format "xml"`)
}
