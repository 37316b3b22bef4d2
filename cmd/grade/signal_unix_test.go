//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// A signal sent to grade's PID alone, as a CI runner cancels a job, mid
// unit test or mid flood, on either clock: the document says interrupted
// with no score, the exit status is the shell's (130 for SIGINT, 143 for
// SIGTERM), and nothing of grade's process group is left running.
func TestSignalToGradeAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds grade and grades until the signal")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "grade")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	tests := []struct {
		name  string
		sig   syscall.Signal
		args  []string
		after string // the line of grade's output after which the signal goes
		code  int
	}{
		// -v: the stage lines the signal waits for are shown in full.
		{"SIGINT mid unit test", syscall.SIGINT, []string{"task2", "-v", "--solutions"}, "unit tests:", 130},
		{"SIGTERM mid flood, wall clock", syscall.SIGTERM, []string{"task1", "-v", "--solutions", "--real", "--no-report"}, "  flooding ", 143},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(bin, append(tt.args, "--out", dir)...)
			cmd.Dir = root
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			pipe, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = cmd.Stdout
			require.NoError(t, cmd.Start())
			pgid := cmd.Process.Pid
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			seen := make(chan struct{})
			var lines []string
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				sc := bufio.NewScanner(pipe)
				signalled := false
				for sc.Scan() {
					lines = append(lines, sc.Text())
					if !signalled && strings.Contains(sc.Text(), tt.after) {
						signalled = true
						close(seen)
					}
				}
			}()
			select {
			case <-seen:
			case <-time.After(3 * time.Minute):
				t.Fatalf("no %q line from grade in 3 minutes", tt.after)
			}
			time.Sleep(500 * time.Millisecond) // into the stage
			require.NoError(t, cmd.Process.Signal(tt.sig), "signal grade's PID alone")
			select {
			case <-readDone: // grade and everything holding its output ended
			case <-time.After(time.Minute):
				t.Fatal("grade's output still open a minute after the signal")
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "grade exited %v", err)
			assert.Equal(t, tt.code, ee.ExitCode(), "exit status")
			defer func() {
				if t.Failed() {
					t.Logf("grade's output:\n%s", strings.Join(lines, "\n"))
				}
			}()

			f, err := os.Open(filepath.Join(dir, "results.json"))
			require.NoError(t, err, "an interrupted grading still writes its document")
			defer f.Close()
			doc, err := results.Decode(f)
			require.NoError(t, err)
			assert.True(t, doc.Interrupted)
			assert.Equal(t, results.StatusInterrupted, doc.Status, "no pass, no fail")
			for _, c := range doc.Checks {
				assert.NotContains(t, c.Message, "context canceled", "%s: an interruption is not the learner's failure", c.Name)
				if c.Status == results.StatusFail {
					t.Errorf("check %q failed after an interruption: %s", c.Name, c.Message)
				}
			}
			// Nothing of its group is left: the go test and servers it
			// started went with it.
			deadline := time.Now().Add(5 * time.Second)
			for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			assert.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "a process of grade's group still runs")
		})
	}
}
