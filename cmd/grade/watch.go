package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"ratelab/grader"
	"ratelab/internal/layout"
	"ratelab/results"
)

// watchEvery is how often grade watch looks at exercises/ for changes.
const watchEvery = 500 * time.Millisecond

var cmdWatch = &command{
	Name:      "watch",
	UsageLine: "watch [TASK]",
	Short:     "re-run the unit tests of the task whose files you save, and show the lab's progress",
	Long: `Watch follows the whole lab, the way rustlings does. It runs the unit stage
of the next task to take (the first with code to write that is not at full
marks in the runs on disk, as 'grade status' finds it), then, each time a
file under exercises/ changes, the unit stage of the task that file
belongs to. After each it shows the score, the first failing check with
the place to edit, and one line of the lab's progress: every task's best
score on disk, or its unit tests' score from this session, and the next
task. Type h and Enter for the hints of the task graded last, n to grade
the task after it, q (or Ctrl-C) to stop.

Given a TASK, it follows that task alone: n moves on to the next task.

It grades one task at a time, never two at once, only the unit tests (the
floods are 'grade TASK'), and writes no results document. It notices
changes by looking at the files twice a second, so it needs no file-system
events and works the same everywhere. Ctrl-C stops the grading under way
with the test binary's whole process group.`,
	Run: noFlags(runWatch),
}

func runWatch(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return usagef("want at most one task, such as 'grade watch task3'")
	}
	root, err := grader.FindRoot(".")
	if err != nil {
		return usageError{err.Error()}
	}
	var tasks []grader.Task
	for _, t := range grader.Tasks() {
		if t.Unit != nil {
			tasks = append(tasks, t)
		}
	}
	if len(args) == 0 {
		return watchLab(ctx, root, tasks)
	}
	idx := slices.IndexFunc(tasks, func(t grader.Task) bool { return t.ID == args[0] })
	if idx < 0 {
		return usagef("task %q has no code to write; 'grade list' shows the tasks", args[0])
	}
	return watchTask(ctx, root, tasks, idx)
}

// readKeys returns the lines typed on stdin, trimmed, until it ends.
func readKeys() <-chan string {
	keys := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			keys <- strings.TrimSpace(sc.Text())
		}
		close(keys)
	}()
	return keys
}

// gradeUnits runs task's unit stage on the learner's exercises and prints
// its score and what to do next. Once ctx is done it returns ctx's cause.
func gradeUnits(ctx context.Context, root string, task grader.Task) (*results.Document, error) {
	doc, err := grader.Grade(ctx, task, grader.Options{Impl: grader.Exercises, Root: root, UnitOnly: true})
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "\n[%s] %s, unit tests: %g/%g\n", time.Now().Format("15:04:05"), task.ID, doc.Score, doc.MaxScore)
	failed := firstFailed(doc)
	switch {
	case failed == nil:
		fmt.Fprintf(stdout, "every unit check passes; 'grade %s' runs the floods\n", task.ID)
	case doc.Status == results.StatusFail:
		printNextStep(stdout, root, doc, "")
	default:
		fmt.Fprintf(stdout, "first check not passed: %s\n  %s\n", failed.Name, failed.Message)
	}
	return doc, nil
}

// watchTask is grade watch TASK: tasks[idx], again at every change under
// exercises/.
func watchTask(ctx context.Context, root string, tasks []grader.Task, idx int) error {
	keys := readKeys()
	fmt.Fprintf(stdout, "watching exercises/ (looking every %s); h for hints, n for the next task, q to quit\n", watchEvery)
	exercises := filepath.Join(root, string(grader.Exercises))
	for {
		task := tasks[idx]
		if _, err := gradeUnits(ctx, root, task); err != nil {
			return err
		}
		last := fingerprint(exercises)
	wait:
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx) // 130 or 143, as run reports a signal
			case k, ok := <-keys:
				if !ok {
					keys = nil
					continue
				}
				switch k {
				case "h":
					printHints(task)
				case "n":
					idx = (idx + 1) % len(tasks)
					break wait
				case "q":
					return nil
				}
			case <-time.After(watchEvery):
				if fingerprint(exercises) != last {
					break wait
				}
			}
		}
	}
}

// watchLab is grade watch with no task: the whole lab.
func watchLab(ctx context.Context, root string, tasks []grader.Task) error {
	keys := readKeys()
	runs := layout.Runs // where grade writes them, as grade status reads them
	disk := progress(readRuns(runs, stderr))
	// The next task to take, among those with unit tests.
	current := tasks[0]
	for _, r := range disk {
		if r.Task.Unit != nil && !r.Full() {
			current = r.Task
			break
		}
	}
	prints := map[string]string{} // task → fingerprint of its package's files
	for _, t := range tasks {
		prints[t.ID] = fingerprint(packageDir(root, t))
	}
	session := map[string]*results.Document{} // task → its unit stage, graded last
	fmt.Fprintf(stdout, "watching the lab's exercises/ (looking every %s); h for hints, n for the next task, q to quit\n", watchEvery)
	queue := []grader.Task{current}
	for {
		// One task at a time, in the order their files changed.
		for _, t := range queue {
			doc, err := gradeUnits(ctx, root, t)
			if err != nil {
				return err
			}
			session[t.ID], current = doc, t
		}
		queue = nil
		disk = progress(readRuns(runs, io.Discard))
		fmt.Fprintln(stdout, labLine(disk, session))
		for len(queue) == 0 {
			select {
			case <-ctx.Done():
				return context.Cause(ctx) // 130 or 143, as run reports a signal
			case k, ok := <-keys:
				if !ok {
					keys = nil
					continue
				}
				switch k {
				case "h":
					printHints(current)
				case "n":
					i := slices.IndexFunc(tasks, func(t grader.Task) bool { return t.ID == current.ID })
					queue = append(queue, tasks[(i+1)%len(tasks)])
				case "q":
					return nil
				}
			case <-time.After(watchEvery):
				for _, t := range tasks {
					if fp := fingerprint(packageDir(root, t)); fp != prints[t.ID] {
						prints[t.ID] = fp
						queue = append(queue, t)
					}
				}
			}
		}
	}
}

// packageDir is the folder of the learner's code for t.
func packageDir(root string, t grader.Task) string {
	return filepath.Join(root, string(grader.Exercises), t.Unit.Package)
}

// labLine is watch's one line of the lab's progress: each task's best
// score on disk, or its unit tests' score from this session when they do
// not all pass yet, then the next task to take.
func labLine(disk []taskProgress, session map[string]*results.Document) string {
	var parts []string
	for _, r := range disk {
		mark := "-"
		switch u := session[r.Task.ID]; {
		case r.Full():
			mark = fmt.Sprintf("%g/%g done", r.Best.Score, r.Best.MaxScore)
		case u != nil && u.Status == results.StatusPass:
			mark = "units pass"
		case u != nil:
			mark = fmt.Sprintf("units %g/%g", u.Score, u.MaxScore)
		case r.Best != nil:
			mark = fmt.Sprintf("%g/%g", r.Best.Score, r.Best.MaxScore)
		case r.Runs > 0:
			mark = "interrupted"
		}
		parts = append(parts, r.Task.ID+" "+mark)
	}
	next, ok := nextTask(disk)
	switch u := session[next.Task.ID]; {
	case !ok:
		parts = append(parts, "next: nothing, every task is at full marks")
	case u != nil && u.Status == results.StatusPass:
		parts = append(parts, fmt.Sprintf("next: grade %s (its floods)", next.Task.ID))
	default:
		parts = append(parts, "next: "+next.Task.ID)
	}
	return "lab: " + strings.Join(parts, " · ")
}

// printHints writes task's hints.
func printHints(task grader.Task) {
	for i, h := range task.Hints {
		fmt.Fprintf(stdout, "hint %d:\n%s\n", i+1, indent(h))
	}
}

// firstFailed returns the first check that did not pass, or nil.
func firstFailed(doc *results.Document) *results.Check {
	for i := range doc.Checks {
		if doc.Checks[i].Status != results.StatusPass {
			return &doc.Checks[i]
		}
	}
	return nil
}

// fingerprint summarises the names, sizes and times of the files under
// dir, so that any save changes it.
func fingerprint(dir string) string {
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		}
		return nil
	})
	return string(h.Sum(nil))
}
