package grader

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ratelab/results"
)

// TestSeriesOverlapsTheNextUnitStage grades tasks 1 and 2 of the reference
// as a Series: task 2's unit stage starts while task 1 floods (task 1 has
// nothing a neighbour could change), yet the log reads as one task after
// the other, and both pass.
func TestSeriesOverlapsTheNextUnitStage(t *testing.T) {
	if testing.Short() {
		t.Skip("grades two tasks")
	}
	var tasks []Task
	for _, id := range []string{"task1", "task2"} {
		task, ok := Lookup(id)
		require.True(t, ok)
		tasks = append(tasks, task)
	}
	var log syncBuffer
	var docs []*results.Document
	Series(context.Background(), tasks, Options{Impl: Solutions, Root: repoRoot(t), Virtual: true, allowEdited: true, Log: &log},
		func(task Task, doc *results.Document, err error) bool {
			require.NoError(t, err, task.ID)
			docs = append(docs, doc)
			return false
		})
	require.Len(t, docs, 2)
	for _, doc := range docs {
		assert.Equal(t, doc.MaxScore, doc.Score, "%s: %s", doc.Task, failedMessages(doc))
	}
	first, second := docs[0], docs[1]
	assert.True(t, second.Started.Before(first.Finished), "task 2 started at %v, before task 1 finished at %v", second.Started, first.Finished)
	assert.LessOrEqual(t, second.TaskSeconds["task2"], second.Finished.Sub(second.Started).Seconds(), "the wait for its turn is not task 2's time")
	out := log.String()
	lastOfFirst := strings.LastIndex(out, "flooding 120/s, 30 s timeout")
	firstOfSecond := strings.Index(out, "task2:")
	require.True(t, lastOfFirst >= 0 && firstOfSecond >= 0, out)
	assert.Less(t, lastOfFirst, firstOfSecond, "task 2's log is held until task 1 has finished:\n%s", out)
}

// TestSeriesStops checks that a Series stops when done says so and when a
// grading fails, cancelling the task started ahead, and returns.
func TestSeriesStops(t *testing.T) {
	blocked := func(ctx context.Context, g *grading) error {
		<-ctx.Done() // only the series' end lets it go
		return ctx.Err()
	}
	quick := func(ctx context.Context, g *grading) error {
		g.quiet()
		return nil
	}
	failing := func(ctx context.Context, g *grading) error {
		g.quiet()
		return errors.New("the grader broke")
	}
	for _, tc := range []struct {
		name  string
		first func(context.Context, *grading) error
		stop  bool
	}{
		{"done says stop", quick, true},
		{"a grading fails", failing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tasks := []Task{{ID: "first", grade: tc.first}, {ID: "second", grade: blocked}, {ID: "third", grade: quick}}
			var seen []string
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				Series(context.Background(), tasks, Options{}, func(task Task, doc *results.Document, err error) bool {
					seen = append(seen, task.ID)
					return tc.stop
				})
			}()
			select {
			case <-finished:
			case <-time.After(10 * time.Second):
				t.Fatal("Series did not return after it stopped")
			}
			assert.Equal(t, []string{"first"}, seen)
		})
	}
}

// TestSeriesYieldsAtLowPriority checks that a grading which yields (as
// task 3 does before its flood of many keys) lets the next one start with
// its unit stage's programs marked for the lowest CPU priority, that one
// started on a grading gone quiet runs at the usual priority, and that a
// task whose floods run on the wall clock waits for quiet instead.
func TestSeriesYieldsAtLowPriority(t *testing.T) {
	for _, tc := range []struct {
		name           string
		yield, virtual bool
		wantLow        bool
	}{
		{"yield", true, true, true},
		{"quiet", false, true, false},
		{"yield to a wall-clock task", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secondBegan := make(chan struct{})
			var secondLow, thirdLow bool
			first := func(ctx context.Context, g *grading) error {
				if tc.yield {
					g.yieldLow()
				} else {
					g.quiet()
				}
				if tc.virtual {
					<-secondBegan // the next grading starts before this one ends
				}
				return nil
			}
			second := func(ctx context.Context, g *grading) error {
				secondLow = lowPriority(g.yielding(ctx))
				return nil
			}
			third := func(ctx context.Context, g *grading) error {
				thirdLow = lowPriority(g.yielding(ctx))
				return nil
			}
			// Ids of tasks with virtual-time floods, so that with
			// Virtual none needs calibration.
			tasks := []Task{
				{ID: "task3", grade: first, ownsMachine: true},
				{ID: "task4", grade: second, planned: func() []planned { close(secondBegan); return nil }},
				{ID: "task5", grade: third},
			}
			var seen []string
			Series(context.Background(), tasks, Options{Virtual: tc.virtual}, func(task Task, doc *results.Document, err error) bool {
				require.NoError(t, err, task.ID)
				seen = append(seen, task.ID)
				return false
			})
			assert.Equal(t, []string{"task3", "task4", "task5"}, seen)
			assert.Equal(t, tc.wantLow, secondLow, "the grading started beside one that yielded runs low")
			assert.False(t, thirdLow, "the one after it started on a quiet grading")
		})
	}
}

// TestGoCommandAtLowPriority checks that a go command marked low runs at
// nice 19 where the system has nice.
func TestGoCommandAtLowPriority(t *testing.T) {
	if _, err := exec.LookPath("nice"); err != nil {
		t.Skip("no nice here: go commands run at the usual priority")
	}
	cmd, err := goCommand(withLowPriority(context.Background()), t.TempDir(), "", "env", "GOROOT")
	require.NoError(t, err)
	goPath, err := exec.LookPath("go")
	require.NoError(t, err)
	assert.Equal(t, []string{"-n", "19", goPath, "env", "GOROOT"}, cmd.Args[1:])
	require.NoError(t, cmd.Run())
	cmd, err = goCommand(context.Background(), t.TempDir(), "", "env", "GOROOT")
	require.NoError(t, err)
	assert.Equal(t, []string{"go", "env", "GOROOT"}, cmd.Args)
}
