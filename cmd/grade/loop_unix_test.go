//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/internal/release"
	"ratelab/results"
)

// buildGrade builds this command into a temporary folder and returns the
// binary's path.
func buildGrade(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "grade")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// gradeIn runs the built grade in dir with args and returns its exit
// status and its output, stdout and stderr together as a terminal shows
// them.
func gradeIn(t *testing.T, bin, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	require.NoError(t, err)
	return 0, out.String()
}

// The learner's loop on a fresh copy of the learner's checkout, as
// 'grade export' makes it: the stub's first grade of task 3 fits a screen
// and names the TODO to start from, -v lists every check, bare 'grade'
// shows the progress, and 'grade watch' follows the lab.
func TestLearnerLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("exports the checkout, builds grade and grades task 3 twice")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := buildGrade(t)
	copyDir := filepath.Join(t.TempDir(), "lab")
	_, err = release.Export(root, copyDir)
	require.NoError(t, err)

	var brief *results.Document
	t.Run("the first grade fits a screen", func(t *testing.T) {
		code, out := gradeIn(t, bin, copyDir, "task3")
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		defer func() {
			if t.Failed() {
				t.Logf("grade task3:\n%s", out)
			}
		}()
		assert.Equal(t, exitFail, code)
		assert.LessOrEqual(t, len(lines), 15, "lines of a stub's first grade")
		assert.Contains(t, out, "task3: who gets the capacity", "says what the task is")
		assert.Contains(t, out, "grade hint task3")
		assert.Contains(t, out, "score 0/")
		// next: exercises/bucket/bucket.go:LINE, then its TODO.
		at := regexp.MustCompile(`(?m)^next: (exercises/\S+\.go):(\d+)\n  (TODO\(task3\).*)$`).FindStringSubmatch(out)
		require.NotNil(t, at, "a next: line naming the edit site")
		src, err := os.ReadFile(filepath.Join(copyDir, at[1]))
		require.NoError(t, err, "the edit site's file exists")
		n, _ := strconv.Atoi(at[2])
		file := strings.Split(string(src), "\n")
		require.Less(t, n-1, len(file))
		assert.Contains(t, file[n-1], "TODO(task3)", "%s:%d holds the TODO", at[1], n)
		assert.Contains(t, at[3], strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(file[n-1]), "//")), "the TODO's text as the file has it")
		assert.Regexp(t, `first failing check: "unit: [^"]+"`, out)
		brief = newestDocument(t, filepath.Join(copyDir, "ratelab-runs"))
	})

	t.Run("-v lists every check", func(t *testing.T) {
		require.NotNil(t, brief, "the first grade's document")
		out := filepath.Join(t.TempDir(), "verbose")
		code, text := gradeIn(t, bin, copyDir, "task3", "-v", "--out", out)
		assert.Equal(t, exitFail, code)
		doc := newestDocument(t, out)
		require.Equal(t, len(brief.Checks), len(doc.Checks), "the same checks with and without -v")
		for i, c := range doc.Checks {
			assert.Contains(t, text, c.Name, "-v lists check %q", c.Name)
			assert.Equal(t, brief.Checks[i].Name, c.Name)
			assert.Equal(t, brief.Checks[i].Status, c.Status, "%s: -v changes what is printed, not the verdict", c.Name)
		}
	})

	t.Run("bare grade shows the progress", func(t *testing.T) {
		code, out := gradeIn(t, bin, copyDir)
		assert.Equal(t, exitPass, code, "%s", out)
		require.NotNil(t, brief, "the first grade's document")
		assert.Regexp(t, fmt.Sprintf(`(?m)^  task3\s+0/%g\s+fail\b`, brief.MaxScore), out)
		assert.Regexp(t, `(?m)^  task4\s+-\s+not graded yet`, out)
		assert.Regexp(t, `(?m)^next: task1 \(not graded yet\)`, out)
	})

	t.Run("watch follows the lab", func(t *testing.T) {
		require.NotNil(t, brief, "the first grade's document")
		watchLabOnce(t, bin, copyDir, fmt.Sprintf("task3 0/%g", brief.MaxScore))
	})
}

// watchLabOnce starts grade watch in dir, saves a file of task 4 once it
// has shown the lab's progress, waits for task 4's regrading and the next
// progress line, and stops it with SIGINT to its PID alone. task3 is how
// the progress line shows the task 3 run on disk.
func watchLabOnce(t *testing.T, bin, dir, task3 string) {
	cmd := exec.Command(bin, "watch")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe() // kept open: no key typed
	require.NoError(t, err)
	defer stdin.Close()
	pipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	lines := make(chan string)
	var all []string
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("grade watch:\n%s", strings.Join(all, "\n"))
		}
	}()
	// await reads lines until one matches re, for at most five minutes (a
	// cold build of the copy's tests): a hang, not a speed target.
	await := func(re string) string {
		t.Helper()
		deadline := time.After(5 * time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("grade watch ended before a line matching %q", re)
				}
				all = append(all, l)
				if regexp.MustCompile(re).MatchString(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("no line matching %q from grade watch", re)
			}
		}
	}
	await(`^\[[0-9:]+\] task2, unit tests: 0/`) // the first task with code and no full marks
	first := await(`^lab: `)
	assert.Contains(t, first, task3, "the runs on disk")
	assert.Contains(t, first, "task2 units 0/", "this session's unit tests")

	retry := filepath.Join(dir, "exercises", "retry", "retry.go")
	f, err := os.OpenFile(retry, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = io.WriteString(f, "\n// saved by the test\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	await(`^\[[0-9:]+\] task4, unit tests: 0/`)
	await(`^next: exercises/retry/retry\.go:\d+$`)
	second := await(`^lab: `)
	assert.Contains(t, second, "task4 units 0/")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT), "Ctrl-C to grade's PID alone")
	for l := range lines {
		all = append(all, l)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "grade watch exited %v", err)
	assert.Equal(t, 130, ee.ExitCode(), "exit status after SIGINT")
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "a process of grade's group still runs")
}

// newestDocument reads the only, or newest, results.json under dir.
func newestDocument(t *testing.T, dir string) *results.Document {
	t.Helper()
	docs := readRuns(dir, io.Discard)
	require.NotEmpty(t, docs, "no results document under %s", dir)
	newest := docs[0].doc
	for _, d := range docs {
		if d.doc.Finished.After(newest.Finished) {
			newest = d.doc
		}
	}
	return newest
}

// grade status on a folder of runs: the best of each task, interrupted
// runs shown as such, an unreadable document named and left out, and the
// first task not at full marks as the next.
func TestStatusFromRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grade")
	}
	bin := buildGrade(t)
	runs := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	write := func(name, impl string, interrupted bool, checks ...results.Check) {
		t.Helper()
		doc := &results.Document{Schema: results.Schema, Task: checks[0].Task, Impl: impl, Started: at, Finished: at, Checks: checks, Runs: []*results.Run{}, Interrupted: interrupted}
		doc.Total()
		at = at.Add(time.Hour)
		require.NoError(t, results.WriteFile(filepath.Join(runs, name, "results.json"), doc, false))
	}
	check := func(task, name string, pass bool, points float64) results.Check {
		c := results.Check{Task: task, Name: name, Status: results.StatusFail, MaxScore: points}
		if pass {
			c.Status, c.Score = results.StatusPass, points
		}
		return c
	}
	write("task1-a", "exercises", false, check("task1", "a", true, 2), check("task1", "b", true, 3))
	write("task2-a", "exercises", false, check("task2", "a", true, 4), check("task2", "b", false, 6))
	write("task2-b", "exercises", false, check("task2", "a", false, 4), check("task2", "b", false, 6)) // newer, worse
	write("task2-ref", "solutions", false, check("task2", "a", true, 4), check("task2", "b", true, 6))
	write("task3-a", "exercises", true, check("task3", "a", true, 1))
	require.NoError(t, os.MkdirAll(filepath.Join(runs, "broken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(runs, "broken", "results.json"), []byte(`{"schema": "ratelab.results/v1", "checks": [`), 0o644))

	code, out := gradeIn(t, bin, t.TempDir(), "status", runs)
	assert.Equal(t, exitPass, code, "%s", out)
	assert.Regexp(t, `(?m)^  task1\s+5/5\s+pass\s+\S+ \S+\s+1$`, out)
	assert.Regexp(t, `(?m)^  task2\s+4/10\s+fail\s+\S+ \S+\s+2$`, out, "the best run, not the newest; the reference's left out")
	assert.Regexp(t, `(?m)^  task3\s+-\s+interrupted, no score\s+\S+ \S+\s+1$`, out)
	assert.Regexp(t, `(?m)^  task4\s+-\s+not graded yet`, out)
	assert.Regexp(t, `(?m)^next: task2 \(best 4/10\).*: grade task2; stuck\? grade hint task2$`, out)
	assert.Regexp(t, `warning: \S*broken/results\.json: truncated JSON`, out)
	assert.Contains(t, out, "progress: 1 of 8 tasks at full marks")

	code, out = gradeIn(t, bin, t.TempDir(), "status")
	assert.Equal(t, exitPass, code, "%s", out)
	assert.Contains(t, out, "from 0 runs")
	assert.Regexp(t, `(?m)^next: task1 \(not graded yet\)`, out)

	code, out = gradeIn(t, bin, t.TempDir(), "status", filepath.Join(runs, "nope"))
	assert.Equal(t, exitUsage, code, "%s", out)

	code, out = gradeIn(t, bin, t.TempDir())
	assert.Equal(t, exitUsage, code, "bare grade outside a checkout: %s", out)
	assert.Contains(t, out, "Usage")
}
