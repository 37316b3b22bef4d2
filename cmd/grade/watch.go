package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"ratelab/grader"
	"ratelab/results"
)

// watchEvery is how often grade watch looks at exercises/ for changes.
const watchEvery = 500 * time.Millisecond

var cmdWatch = &command{
	Name:      "watch",
	UsageLine: "watch [TASK]",
	Short:     "re-run a task's unit tests whenever you save a file under exercises/",
	Long: `Watch runs the unit stage of TASK (by default the first task with code to
write whose unit tests do not all pass yet) and runs it again each time a
file under exercises/ changes, the way rustlings does. It shows the first
check that fails. Type h and Enter for that task's hints, n for the next
task, q (or Ctrl-C) to stop.

It notices changes by looking at the files twice a second, so it needs no
file-system events and works the same everywhere.`,
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
	idx := 0
	if len(args) == 1 {
		idx = -1
		for i, t := range tasks {
			if t.ID == args[0] {
				idx = i
			}
		}
		if idx < 0 {
			return usagef("task %q has no code to write; 'grade list' shows the tasks", args[0])
		}
	}
	return watch(ctx, root, tasks, idx, len(args) == 0)
}

// watch is the loop of grade watch.
func watch(ctx context.Context, root string, tasks []grader.Task, idx int, advance bool) error {
	keys := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			keys <- strings.TrimSpace(sc.Text())
		}
		close(keys)
	}()
	fmt.Fprintf(stdout, "watching exercises/ (looking every %s); h for hints, n for the next task, q to quit\n", watchEvery)
	last := ""
	for {
		task := tasks[idx]
		doc, err := grader.Grade(ctx, task, grader.Options{Impl: grader.Exercises, Root: root, UnitOnly: true})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		failed := firstFailed(doc)
		if failed == nil && advance && idx+1 < len(tasks) {
			fmt.Fprintf(stdout, "\n%s: all %g points of its unit tests. On to %s.\n", task.ID, doc.MaxScore, tasks[idx+1].ID)
			idx++
			continue
		}
		fmt.Fprintf(stdout, "\n[%s] %s: %g/%g\n", time.Now().Format("15:04:05"), task.ID, doc.Score, doc.MaxScore)
		if failed == nil {
			fmt.Fprintf(stdout, "every unit check passes; run 'go run ./cmd/grade %s' for the floods\n", task.ID)
		} else {
			fmt.Fprintf(stdout, "first failing check: %s\n  %s\n", failed.Name, failed.Message)
		}
		last = fingerprint(root)
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case k, ok := <-keys:
				if !ok {
					keys = nil
					continue
				}
				switch k {
				case "h":
					for i, h := range task.Hints {
						fmt.Fprintf(stdout, "hint %d:\n%s\n", i+1, indent(h))
					}
				case "n":
					idx = (idx + 1) % len(tasks)
					break wait
				case "q":
					return nil
				}
			case <-time.After(watchEvery):
				if fp := fingerprint(root); fp != last {
					break wait
				}
			}
		}
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
// exercises/, so that any save changes it.
func fingerprint(root string) string {
	h := sha256.New()
	_ = filepath.WalkDir(filepath.Join(root, "exercises"), func(p string, d fs.DirEntry, err error) error {
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
